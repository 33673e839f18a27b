package jepsen

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/linkraft/linkraft/internal/clusterkey"
	"github.com/linkraft/linkraft/internal/peertls"
	"github.com/linkraft/linkraft/transport"
)

// The hostile fault is a stranger on the nodes' network while the
// workloads run: from the clients' side of the bridge it sends, to every
// node's peer and gossip ports, in rounds until healed,
//
//   - plain TCP speaking the mux header and the internal RPC: an apply of a
//     javascript: link, and a frame announcing a megabyte that sends nine
//     bytes and holds the connection;
//   - a Raft header with garbage after it;
//   - TLS 1.3 without a client certificate, and with the certificate of
//     another cluster key (a node of another cluster, speaking as n1);
//   - random bytes over UDP and TCP to the gossip port (memberlist answers a
//     stream it cannot read with an error sealed under the gossip key,
//     which the stranger cannot open: counted, not a breach);
//   - a keyless memberlist node that asks to join.
//
// None may get an answer: a byte of application data back on the peer port,
// or a join that reaches a member, is a breach, and the nemesis checker
// makes the run invalid. The effect recorded is how many attacks reached
// a port. Whether the nodes stayed well is every other checker's to judge
// (no exit, no ERROR line, no lost write).

// hostileRound is one round of attacks on every node.
const hostileRound = 250 * time.Millisecond

// memberlistEncryptMsg is memberlist's message type of an encrypted
// envelope (hashicorp/memberlist net.go, v0.7.0).
const memberlistEncryptMsg = 10

type hostileStats struct {
	attempts, connected, answered atomic.Int64
	sealed                        atomic.Int64 // answers sealed with the gossip key
	mu                            sync.Mutex
	breaches                      []string
}

func (s *hostileStats) breach(what string) {
	s.answered.Add(1)
	s.mu.Lock()
	if len(s.breaches) < 5 {
		s.breaches = append(s.breaches, what)
	}
	s.mu.Unlock()
}

// startHostile starts the attack loop; the injection's heal stops it.
func (n *nemesis) startHostile(ctx context.Context) (*injection, error) {
	other, err := clusterkey.Generate()
	if err != nil {
		return nil, err
	}
	stranger, err := peertls.New(peertls.Config{NodeID: "n1", ClusterKey: &other})
	if err != nil {
		return nil, err
	}
	st := &hostileStats{}
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(hostileRound)
		defer t.Stop()
		for round := 0; ; round++ {
			for _, d := range n.db.nodes {
				n.attackPeer(actx, st, d, stranger)
				attackGossip(actx, st, d)
			}
			if round%8 == 0 {
				n.strangerJoin(st)
			}
			select {
			case <-actx.Done():
				return
			case <-t.C:
			}
		}
	})
	measure := func(context.Context) (string, bool, error) {
		st.mu.Lock()
		defer st.mu.Unlock()
		effect := fmt.Sprintf("%d attacks, %d reached a port, %d answered (and %d gossip refusals sealed with the cluster's key)",
			st.attempts.Load(), st.connected.Load(), st.answered.Load(), st.sealed.Load())
		if len(st.breaches) > 0 {
			effect += fmt.Sprintf(" (BREACH: %v)", st.breaches)
		}
		return effect, st.connected.Load() > 0, nil
	}
	return &injection{
		detail:  "stranger traffic to every peer and gossip port",
		measure: measure,
		breach:  func() bool { return st.answered.Load() > 0 },
		heal: func(context.Context) error {
			cancel()
			wg.Wait()
			return nil
		},
	}, nil
}

// attackPeer runs the peer-port attacks on one node.
func (n *nemesis) attackPeer(ctx context.Context, st *hostileStats, d *dbNode, stranger *peertls.Identity) {
	addr := net.JoinHostPort(d.ip, strconv.Itoa(raftPort))
	apply := []byte(`{"op":"apply","group":1,"cmd":"` + forgedCreate() + `"}`)
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(apply)))
	frame = append(frame, apply...)
	// The peer protocol's hello (package peer): a frame holding an
	// envelope of operation 0 whose body is Hello{Version: 1}.
	hello := append(binary.BigEndian.AppendUint32(nil, 4), 0x1a, 0x02, 0x08, 0x01)
	attempts := []struct {
		what    string
		kind    transport.Kind
		tls     *tls.Config
		payload []byte
	}{
		{"plain peer hello", transport.KindPeer, nil, hello},
		{"peer hello over TLS without a certificate", transport.KindPeer, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}, hello}, //nolint:gosec // the attacker's side
		{"peer hello over TLS of another cluster key", transport.KindPeer, stranger.ClientConfig(), hello},
		{"plain RPC apply", transport.KindRPC, nil, frame},
		{"plain frame flood", transport.KindRPC, nil, append(binary.BigEndian.AppendUint32(nil, 1<<20), "123456789"...)},
		{"plain raft garbage", transport.KindRaft, nil, randomBytes(64)},
		{"TLS without a certificate", transport.KindRPC, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}, frame}, //nolint:gosec // the attacker's side
		{"TLS of another cluster key", transport.KindRPC, stranger.ClientConfig(), frame},
	}
	for _, a := range attempts {
		st.attempts.Add(1)
		conn, err := transport.Dial(ctx, addr, a.kind, 1, time.Second, a.tls)
		if err != nil {
			// A refused TLS handshake is a dial error after the TCP
			// connection was made: the port was reached.
			if a.tls != nil {
				st.connected.Add(1)
			}
			continue
		}
		st.connected.Add(1)
		_ = conn.SetDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := conn.Write(a.payload); err == nil {
			var b [1]byte
			if k, _ := io.ReadFull(bufio.NewReader(conn), b[:]); k > 0 {
				st.breach(fmt.Sprintf("%s on %s got an answer", a.what, d.id))
			}
		}
		_ = conn.Close()
	}
}

// attackGossip sends random bytes to a node's gossip port, over UDP and
// TCP; a TCP answer is a breach.
func attackGossip(ctx context.Context, st *hostileStats, d *dbNode) {
	addr := net.JoinHostPort(d.ip, strconv.Itoa(gossipPort))
	st.attempts.Add(2)
	if c, err := net.Dial("udp", addr); err == nil {
		if _, err := c.Write(randomBytes(512)); err == nil {
			st.connected.Add(1)
		}
		_ = c.Close()
	}
	dl := net.Dialer{Timeout: time.Second}
	c, err := dl.DialContext(ctx, "tcp", addr)
	if err != nil {
		return
	}
	st.connected.Add(1)
	_ = c.SetDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := c.Write(randomBytes(512)); err == nil {
		var b [1]byte
		// memberlist answers a stream it cannot read with its error
		// message, encrypted under the cluster's gossip key (its
		// encryptMsg envelope, type 10): the stranger can read none of
		// it. Anything else is a breach.
		if k, _ := c.Read(b[:]); k > 0 {
			if b[0] == memberlistEncryptMsg {
				st.sealed.Add(1)
			} else {
				st.breach(fmt.Sprintf("random bytes to the gossip port of %s got an answer in clear (message type %d)", d.id, b[0]))
			}
		}
	}
	_ = c.Close()
}

// strangerJoin starts a keyless memberlist node on the clients' side of
// the bridge and asks every node to let it join; reaching one is a breach.
func (n *nemesis) strangerJoin(st *hostileStats) {
	cfg := memberlist.DefaultLocalConfig()
	cfg.Name = "stranger"
	cfg.BindAddr = n.env.HostIP().String()
	cfg.BindPort = 0
	cfg.LogOutput = io.Discard
	cfg.TCPTimeout = time.Second
	ml, err := memberlist.Create(cfg)
	if err != nil {
		return
	}
	defer func() { _ = ml.Shutdown() }()
	var addrs []string
	for _, d := range n.db.nodes {
		addrs = append(addrs, net.JoinHostPort(d.ip, strconv.Itoa(gossipPort)))
	}
	st.attempts.Add(1)
	st.connected.Add(1)
	if joined, _ := ml.Join(addrs); joined > 0 {
		st.breach(fmt.Sprintf("a keyless gossip node joined through %d nodes", joined))
	}
}

// forgedCreate is a base64 create command of a javascript: link.
func forgedCreate() string {
	// type 1 (create), field 1 code "evil", field 2 URL.
	b := []byte{1}
	b = appendField(b, 1, "evil")
	b = appendField(b, 2, "javascript:alert(document.cookie)")
	return base64.StdEncoding.EncodeToString(b)
}

func appendField(b []byte, num int, s string) []byte {
	b = binary.AppendUvarint(b, uint64(num<<3|2))
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}
