package cluster

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/idrange"
	"github.com/linkraft/linkraft/internal/atomicfile"
	"github.com/linkraft/linkraft/internal/peertls"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/meta"
	"github.com/linkraft/linkraft/peer"
	"github.com/linkraft/linkraft/raftgroup"
	"github.com/linkraft/linkraft/raftgroup/nodelog"
	"github.com/linkraft/linkraft/transport"
)

// maxMetaVoters bounds the voters of the meta group; other nodes follow it
// as non-voters so that every node has the placement locally.
const maxMetaVoters = 5

// Node is one linknode: its peer port, gossip, the meta group and the
// shards placed on it, and the roles the HTTP layer calls.
type Node struct {
	cfg Config
	log *slog.Logger
	// incarnation is the ID of this data dir (identity.go).
	incarnation string

	// lifetime ends when Close starts; the peer server's requests watch
	// it. loops ends first on Close: the background loops stop before the
	// node hands off its leaderships, while the peer server still serves.
	lifetime  context.Context
	stopAll   context.CancelFunc
	loops     context.Context
	stopLoops context.CancelFunc
	bg        sync.WaitGroup // background loops
	rpcWG     sync.WaitGroup // the peer servers

	port   peerPort
	peers  *peer.Client
	gossip *gossip // nil without gossip
	// meta is set in Open; registry too, earlier, for the peer-port
	// handshakes that start before Open has set meta.
	meta     *meta.Meta
	registry atomic.Pointer[meta.Meta]
	// logs is the Raft log shared by the node's groups (logs.go); nil
	// below levelSharedLog.
	logs *nodelog.Store

	host      host
	router    router
	remote    *remoteCache
	storage   storageAlarm
	admission admission
	formation formation
	leader    leaderLoop
	clicks    clickPipeline
	alloc     *idrange.Allocator
	startup   startup

	links Links
	// locality says which shards generated codes may prefer (locality.go).
	locality  locality
	keys      Keys
	admin     Admin
	analytics Analytics

	closeOnce sync.Once
	closeErr  error
}

// peerPort is the node's peer listener: its multiplexer, serving until
// Close, and the error that stopped it early, if any.
type peerPort struct {
	mux       *transport.Mux
	verifyRPC func(net.Conn, raft.RPCHeader) error // nil when insecure
	cancel    context.CancelFunc
	done      chan struct{}
	err       atomic.Pointer[error]
}

// New validates cfg and returns a Node; Open starts it.
func New(cfg Config) (*Node, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	remote, err := newRemoteCache(cfg.RemoteCacheTTL)
	if err != nil {
		return nil, err
	}
	lifetime, stop := context.WithCancel(context.Background())
	loops, stopLoops := context.WithCancel(lifetime)
	n := &Node{cfg: cfg, log: cfg.Logger, lifetime: lifetime, stopAll: stop, loops: loops, stopLoops: stopLoops, remote: remote}
	n.host.n, n.router.n, n.admission.n, n.formation.n, n.leader.n, n.clicks.n = n, n, n, n, n, n
	n.links.n, n.keys.n, n.admin.n, n.analytics.n = n, n, n, n
	n.storage = storageAlarm{cfg: cfg, log: cfg.Logger, freePages: n.freePages, visits: n.clicks.visitUse}
	return n, nil
}

// Open starts the node: the peer port and the peer server, gossip, the
// meta group (formed on first start: formation.go), the cluster settings
// and placement (written by the meta leader), the shards placed here, and
// the ID allocator. It returns once the settings are known and every group
// hosted here has a leader, or ctx ends.
func (n *Node) Open(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			_ = n.Close()
		}
	}()
	n.startup.set("opening its data dir and peer port")
	if err := n.openDataDir(); err != nil {
		return err
	}
	if err := n.openLogs(); err != nil {
		return err
	}
	if err := n.clicks.open(); err != nil {
		return err
	}
	advertise, err := n.openPeerPort()
	if err != nil {
		return err
	}
	if n.cfg.GossipAddr != "" {
		if err := n.startGossip(advertise); err != nil {
			return err
		}
	}
	if err := n.formation.form(ctx, advertise); err != nil {
		return err
	}
	if err := n.join(ctx); err != nil {
		return err
	}
	n.alloc, err = idrange.NewAllocator(idrange.AllocatorConfig{Leaser: idrange.LeaserFunc(n.leaseRange), BlockSize: n.cfg.IDBlockSize})
	if err != nil {
		return err
	}
	s := n.host.settings
	n.log.Info("node open", "raft_addr", advertise, "shards", s.Shards, "hosted", len(n.host.localShards()),
		"code_mode", s.CodeMode, "cluster_id", s.ClusterID)
	return nil
}

// openDataDir makes the data dir, refuses one a newer version wrote, and
// reads the node's identity and formation state from it. openLogs records
// the level this run is at.
func (n *Node) openDataDir() error {
	if err := os.MkdirAll(n.cfg.DataDir, 0o750); err != nil {
		return fmt.Errorf("cluster: -data-dir: %w", err)
	}
	if err := checkDataLevel(n.cfg.DataDir); err != nil {
		return err
	}
	id, err := loadNodeID(n.cfg.DataDir, n.cfg.NodeID)
	if err != nil {
		return err
	}
	n.cfg.NodeID = id
	n.log = n.log.With("node", id)
	if n.incarnation, err = loadIncarnation(n.cfg.DataDir); err != nil {
		return err
	}
	if err := n.formation.load(formationPath(n.cfg.DataDir)); err != nil {
		return fmt.Errorf("cluster: %s is damaged (%w): it records how this node formed or joined its cluster; restore the data dir from a copy, or, if the other nodes are healthy, replace the node: linknode remove it, then start a new one on an empty -data-dir", formationPath(n.cfg.DataDir), err)
	}
	return nil
}

// openPeerPort binds the peer port, starts its multiplexer (with mutual
// TLS unless insecure), opens the meta group on it and starts the peer
// servers. It returns the advertised peer address.
func (n *Node) openPeerPort() (string, error) {
	ln, err := net.Listen("tcp", n.cfg.RaftAddr)
	if err != nil {
		return "", fmt.Errorf("cluster: -raft-addr %s: %w: stop what listens there (another linknode?) or choose another -raft-addr", n.cfg.RaftAddr, err)
	}
	advertise, err := AdvertiseAddr(ln.Addr().String(), n.cfg.AdvertiseHost)
	if err != nil {
		ln.Close()
		return "", err
	}
	tcfg := transport.Config{Listener: ln, Advertise: advertise, Logger: n.log.With("component", "mux")}
	if n.cfg.ClusterKey != nil {
		ident, err := peertls.New(peertls.Config{
			NodeID: n.cfg.NodeID, ClusterKey: n.cfg.ClusterKey, Incarnation: n.incarnation, VerifyPeer: n.admission.verifyPeer,
			CAFile: n.cfg.PeerTLSCA, CertFile: n.cfg.PeerTLSCert, KeyFile: n.cfg.PeerTLSKey,
		})
		if err != nil {
			ln.Close()
			return "", fmt.Errorf("cluster: peer TLS: %w", err)
		}
		tcfg.ServerTLS, tcfg.ClientTLS = ident.ServerConfig(), ident.ClientConfig()
		n.port.verifyRPC = verifyPeerRPC
	}
	if n.port.mux, err = transport.New(tcfg); err != nil {
		ln.Close()
		return "", err
	}
	n.peers = newPeerClient(n.port.mux)
	muxCtx, cancel := context.WithCancel(context.Background())
	n.port.cancel, n.port.done = cancel, make(chan struct{})
	go func() {
		defer close(n.port.done)
		if err := n.port.mux.Serve(muxCtx); err != nil {
			n.log.Error("peer port stopped", "err", err)
			n.port.err.Store(&err)
		}
	}()
	// The peer servers need the meta group; callers that connect meanwhile
	// wait in the layers' backlogs.
	layers := make([]*transport.Layer, 0, 2)
	for _, k := range []transport.Kind{transport.KindPeer, transport.KindRPC} {
		l, err := n.port.mux.Layer(k, 0)
		if err != nil {
			for _, l := range layers {
				l.Close()
			}
			return "", err
		}
		layers = append(layers, l)
	}
	if err := n.openMeta(); err != nil {
		for _, l := range layers {
			l.Close()
		}
		return "", err
	}
	n.servePeers(layers[0], layers[1])
	return advertise, nil
}

// openMeta opens this node's replica of the meta group.
func (n *Node) openMeta() error {
	dir := n.groupDir("meta")
	layer, err := n.port.mux.Layer(transport.KindRaft, uint64(command.MetaGroup))
	if err != nil {
		return err
	}
	m, err := meta.Open(raftgroup.Config{
		NodeID: n.cfg.NodeID, Dir: dir, Log: n.groupLog("meta"), Stream: transport.RaftLayer{Layer: layer},
		VerifyRPC: n.port.verifyRPC, Timing: n.cfg.Timing, Logger: n.log,
	})
	if err != nil {
		layer.Close()
		return fmt.Errorf("cluster: open the meta group (%s): %w. If the other nodes are healthy, stop this node, run `linknode repair-shard -data-dir %s meta` and start it again",
			dir, err, n.cfg.DataDir)
	}
	n.registry.Store(m) // handshakes check the registry from now on
	n.meta = m
	return nil
}

// join waits for the meta group's leader, starts the background loops,
// waits for the settings and placement, opens the shards placed here and
// waits for their leaders.
func (n *Node) join(ctx context.Context) error {
	n.startup.set("waiting for the meta group's leader")
	if err := n.meta.Group().WaitLeader(ctx); err != nil {
		return fmt.Errorf("cluster: meta group has no leader: %w", err)
	}
	n.startup.set("waiting for the cluster settings and placement")
	if n.gossip != nil {
		n.gossip.setBootstrapped()
	}
	n.loop(n.leader.run)
	n.storage.check(n.gossip)
	n.loop(func() { n.every(n.cfg.StorageInterval, func() { n.storage.check(n.gossip) }) })
	if err := n.host.waitSettings(ctx); err != nil {
		return err
	}
	if n.gossip != nil {
		n.gossip.setCluster(n.host.settings.ClusterID)
	}
	if err := n.host.sync(); err != nil {
		return err
	}
	n.loop(n.host.loop)
	n.startup.set("waiting for a leader in every group hosted here")
	// A shard moved away meanwhile (the placement changes while a node
	// opens) is not waited for: it left this node.
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for _, s := range n.host.localShards() {
		for {
			if addr, _ := s.Group().Leader(); addr != "" || n.host.local(s.ID()) != s {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("cluster: shard %d has no leader: %w: %w", s.ID(), link.ErrUnavailable, ctx.Err())
			case <-t.C:
			}
		}
	}
	return nil
}

// loop runs fn as a background loop: Close waits for it.
func (n *Node) loop(fn func()) { n.bg.Go(fn) }

// every runs fn each interval until the node's background loops stop.
func (n *Node) every(interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-n.loops.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// AdvertiseAddr is the address other nodes and clients use for a listener
// bound to bound: host (the -advertise-host) with the bound port, or, when
// host is empty, the bound host itself unless it is unspecified (":7000",
// "0.0.0.0:7000"), which becomes 127.0.0.1.
func AdvertiseAddr(bound, host string) (string, error) {
	bh, port, err := net.SplitHostPort(bound)
	if err != nil {
		return "", err
	}
	if host == "" {
		host = bh
		if ip := net.ParseIP(bh); bh == "" || (ip != nil && ip.IsUnspecified()) {
			host = "127.0.0.1"
		}
	}
	return net.JoinHostPort(host, port), nil
}

// loadNodeID returns the ID stored in dataDir (which must be want, if
// given), or want, or a new one, stored there.
func loadNodeID(dataDir, want string) (string, error) {
	p := filepath.Join(dataDir, "node-id")
	id, err := storedNodeID(dataDir)
	switch {
	case err == nil:
		if want != "" && want != id {
			return "", fmt.Errorf("cluster: -node-id %q: -data-dir %s belongs to node %q: give -node-id %q (or none), or give this node its own -data-dir", want, dataDir, id, id)
		}
		return id, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", err
	}
	id = want
	if id == "" {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		id = "node-" + hex.EncodeToString(b[:])
	}
	if err := writeFileSync(p, []byte(id+"\n")); err != nil {
		return "", err
	}
	return id, nil
}

// storedNodeID is the node ID kept in dataDir.
func storedNodeID(dataDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "node-id"))
	return strings.TrimSpace(string(b)), err
}

func writeFileSync(path string, data []byte) error { return atomicfile.Write(path, data, 0o600) }

func (n *Node) groupDir(parts ...string) string {
	return filepath.Join(append([]string{n.cfg.DataDir}, parts...)...)
}

// leaseRange leases count IDs through the meta group's leader.
func (n *Node) leaseRange(ctx context.Context, count uint64) (uint64, uint64, error) {
	if start, end, ok := faultNoLease(count); ok {
		return start, end, nil
	}
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	// A lease whose outcome is unknown (the meta leader lost leadership
	// while committing it) is asked for again: a grant is always a fresh
	// range, so a lost one only leaves IDs unused, never issued twice.
	r, err := n.router.retryUnknown(ctx, command.MetaGroup, (&command.LeaseRange{Node: n.cfg.NodeID, N: count}).Encode())
	if err != nil {
		return 0, 0, err
	}
	n.log.Debug("leased id range", "start", r.LeaseStart, "end", r.LeaseEnd)
	return r.LeaseStart, r.LeaseEnd, nil
}

// ID returns the node's Raft server ID.
func (n *Node) ID() string { return n.cfg.NodeID }

// RaftAddr returns the advertised peer address.
func (n *Node) RaftAddr() string { return n.port.mux.Addr() }

// Settings returns the cluster settings.
func (n *Node) Settings() command.Settings { return *n.host.settings }

// Links is the node's links role.
func (n *Node) Links() *Links { return &n.links }

// Keys is the node's API keys and blocklist role.
func (n *Node) Keys() *Keys { return &n.keys }

// Admin is the node's operator role.
func (n *Node) Admin() *Admin { return &n.admin }

// Analytics is the node's click analytics role.
func (n *Node) Analytics() *Analytics { return &n.analytics }

// Close stops the background loops and the allocator, leaves gossip, and
// stops every shard group, the meta group and the peer port, in that order.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		// The last click batches go out while every group still runs.
		errs := []error{n.clicks.close()}
		// Then leave gossip, so peers see this node go and stop choosing
		// it as the target of leader balancing.
		if n.gossip != nil {
			errs = append(errs, n.gossip.close())
		}
		n.stopLoops()
		n.bg.Wait()           // no loop may open a shard or propose after this
		n.handOffLeadership() // the peer server still serves calls forwarded meanwhile
		n.stopAll()
		if n.alloc != nil {
			n.alloc.Close()
		}
		errs = append(errs, n.host.close()...)
		if n.meta != nil {
			errs = append(errs, n.meta.Close())
		}
		if n.logs != nil {
			errs = append(errs, n.logs.Close())
		}
		if n.port.mux != nil {
			n.port.cancel()
			errs = append(errs, n.port.mux.Close())
			<-n.port.done
		}
		n.rpcWG.Wait()
		if n.peers != nil {
			n.peers.Close()
		}
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

// freePages returns the free-page bytes of every bbolt file the node's
// groups hold open, by path (the storage alarm does not count them).
func (n *Node) freePages() map[string]int64 {
	free := map[string]int64{}
	for _, s := range n.host.localShards() {
		s.Group().FreeBytes(free)
	}
	for _, l := range n.host.leavingShards() {
		l.s.Group().FreeBytes(free)
	}
	if m := n.meta; m != nil {
		m.Group().FreeBytes(free)
	}
	return free
}

// handOffLeadership moves the leadership of every group this node leads to
// another voter before it stops, so clients see a leader change of one
// election's length at most instead of a failure timeout (Consul's
// leadershipTransfer, rqlite's Stepdown). Bounded by five seconds in all.
func (n *Node) handOffLeadership() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var groups []*raftgroup.Group
	for _, s := range n.host.localShards() {
		groups = append(groups, s.Group())
	}
	if n.meta != nil {
		groups = append(groups, n.meta.Group())
	}
	var wg sync.WaitGroup
	for _, g := range groups {
		if !g.IsLeader() {
			continue
		}
		wg.Go(func() {
			if err := g.TransferLeadership(ctx, "", ""); err != nil {
				n.log.Warn("leadership hand-off before stop", "group", g.Name(), "err", err)
			}
		})
	}
	wg.Wait()
}

// newNonce returns a random non-zero create nonce.
func newNonce() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		if v := binary.LittleEndian.Uint64(b[:]); v != 0 {
			return v
		}
	}
}

func withDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}
