package cluster

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// memberMeta is what a node tells the others about itself through gossip
// (memberlist node metadata, at most 512 bytes).
type memberMeta struct {
	RaftAddr string `json:"r"`
	HTTPAddr string `json:"h"`
	// Bootstrapped is true once the node's meta group has state: such a
	// node belongs to a formed cluster, and nobody may bootstrap another.
	Bootstrapped bool `json:"b"`
	// Full is the node's storage alarm.
	Full bool `json:"f,omitempty"`
	// Cluster is the cluster ID of the node's meta state ("" while new);
	// Incarnation is the ID of its data dir.
	Cluster     string `json:"c,omitempty"`
	Incarnation string `json:"i,omitempty"`
	// Level is the node's feature level (featureLevel).
	Level int `json:"l,omitempty"`
	// Leads is how many shards the node leads: leaders balance against
	// it, as each node knows only the leaders of the shards it hosts.
	Leads int `json:"ld,omitempty"`
}

// Member is a node as gossip sees it.
type Member struct {
	ID           string
	RaftAddr     string
	HTTPAddr     string
	GossipAddr   string
	Alive        bool
	Bootstrapped bool
	Full         bool
	Cluster      string
	Incarnation  string
	// Level is the member's feature level: what its version can apply.
	Level int
	// Leads is how many shards the member said it leads.
	Leads int
}

// gossip wraps memberlist: discovery, failure detection and the node
// metadata above.
type gossip struct {
	ml *memberlist.Memberlist
	// addr is the gossip address others can join, read once at start:
	// memberlist's LocalNode hands out its own node record, which
	// UpdateNode rewrites (a data race the detector found in CI).
	addr   string
	log    *slog.Logger
	events chan struct{} // coalesced "membership changed" signal

	mu    sync.Mutex
	meta  memberMeta
	nodes map[string]Member // as the event callbacks reported them

	// broadcasts carries cache invalidations to nodes without a replica;
	// onInvalidate receives the ones other nodes send.
	broadcasts   *memberlist.TransmitLimitedQueue
	onInvalidate func(code string, version uint64)
	// onRefused receives the reason another node's meta leader refused
	// this one.
	onRefused func(from, reason string)

	// leadsSent is the lead count last gossiped (under mu); leadsWG
	// tracks the one update that may be under way (leadsBusy).
	leadsSent int
	leadsBusy atomic.Bool
	leadsWG   sync.WaitGroup
	closed    bool // under mu: no update starts after close
}

type gossipConfig struct {
	NodeID        string
	BindAddr      string // host:port; port 0 picks one
	AdvertiseHost string
	SecretKey     []byte
	Meta          memberMeta
	Fast          bool // memberlist's local-network timers (tests)
	Logger        *slog.Logger
	OnInvalidate  func(code string, version uint64)
	OnRefused     func(from, reason string)
}

func startGossipOn(cfg gossipConfig) (*gossip, error) {
	host, portStr, err := net.SplitHostPort(cfg.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("gossip address %q: %w", cfg.BindAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("gossip port %q: %w", portStr, err)
	}
	mc := memberlist.DefaultLANConfig()
	if cfg.Fast {
		mc = memberlist.DefaultLocalConfig()
	}
	mc.Name = cfg.NodeID
	if host == "" {
		host = "0.0.0.0"
	}
	mc.BindAddr = host
	mc.BindPort = port
	mc.AdvertisePort = port
	// As AdvertiseAddr, except that memberlist needs an IP: a bind host
	// name advertises 127.0.0.1 too.
	adv := cfg.AdvertiseHost
	if adv == "" {
		if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
			adv = "127.0.0.1"
		} else {
			adv = host
		}
	}
	if net.ParseIP(adv) == nil {
		// A host name (a container's, say): memberlist wants its address.
		ips, err := net.LookupIP(adv)
		if err != nil || len(ips) == 0 {
			return nil, fmt.Errorf("-advertise-host %q: no address for it: %v: give a name this machine resolves, or an IP", adv, err)
		}
		adv = ips[0].String()
	}
	mc.AdvertiseAddr = adv
	mc.SecretKey = cfg.SecretKey
	mc.Logger = slog.NewLogLogger(cfg.Logger.With("component", "memberlist").Handler(), slog.LevelDebug)
	g := &gossip{log: cfg.Logger, events: make(chan struct{}, 1), meta: cfg.Meta, nodes: map[string]Member{}, onInvalidate: cfg.OnInvalidate, onRefused: cfg.OnRefused}
	mc.Delegate = g
	mc.Events = g
	// Each transmission goes to one node (probes and gossip rounds both
	// piggyback broadcasts), so the budget must exceed the fan-out by a
	// margin: 8 × ceil(log10(n+1)) sends. The queue exists before
	// memberlist starts: its goroutines ask for broadcasts at once.
	var started atomic.Pointer[memberlist.Memberlist]
	g.broadcasts = &memberlist.TransmitLimitedQueue{RetransmitMult: 8, NumNodes: func() int {
		if ml := started.Load(); ml != nil {
			return ml.NumMembers()
		}
		return 1
	}}
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("gossip: -gossip-addr %s: %w: the port must be free for both TCP and UDP; stop what uses it (another linknode?) or choose another -gossip-addr", cfg.BindAddr, err)
	}
	started.Store(ml)
	g.ml = ml
	local := ml.LocalNode()
	g.addr = net.JoinHostPort(local.Addr.String(), strconv.Itoa(int(local.Port)))
	return g, nil
}

// raftAddr returns the peer address of live member id, or "".
func (g *gossip) raftAddr(id string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m, ok := g.nodes[id]; ok && m.Alive {
		return m.RaftAddr
	}
	return ""
}

// Addr returns the gossip address others can join.
func (g *gossip) Addr() string { return g.addr }

// setBootstrapped updates the node's metadata and gossips it.
func (g *gossip) setBootstrapped() {
	g.updateMeta(func(m *memberMeta) { m.Bootstrapped = true })
}

// updateMeta changes the node's metadata and, if it changed, gossips it.
func (g *gossip) updateMeta(change func(*memberMeta)) {
	g.mu.Lock()
	before := g.meta
	change(&g.meta)
	changed := g.meta != before
	g.mu.Unlock()
	if changed {
		if err := g.ml.UpdateNode(5 * time.Second); err != nil {
			g.log.Warn("gossip metadata update", "err", err)
		}
	}
}

// setLeads records how many shards the node leads and gossips it in the
// background (one update at a time; a count that changed meanwhile, or
// whose update failed, goes with the next call): memberlist's UpdateNode waits for the broadcast,
// and the leader loop that calls this must not.
func (g *gossip) setLeads(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.meta.Leads = n
	if g.closed || g.leadsSent == n || !g.leadsBusy.CompareAndSwap(false, true) {
		return
	}
	g.leadsWG.Go(func() {
		defer g.leadsBusy.Store(false)
		g.mu.Lock()
		g.leadsSent = g.meta.Leads
		g.mu.Unlock()
		if err := g.ml.UpdateNode(time.Second); err != nil {
			g.mu.Lock()
			g.leadsSent = -1 // sent again with the next call
			g.mu.Unlock()
		}
	})
}

// setFull updates the node's storage alarm and gossips it.
func (g *gossip) setFull(full bool) {
	g.updateMeta(func(m *memberMeta) { m.Full = full })
}

// fullNodes returns the live nodes whose storage alarm is on.
func (g *gossip) fullNodes() map[string]bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out map[string]bool
	for id, m := range g.nodes {
		if m.Alive && m.Full {
			if out == nil {
				out = map[string]bool{}
			}
			out[id] = true
		}
	}
	return out
}

// members returns every node gossip has reported, sorted by ID. It reads
// the copy kept by the event callbacks: the *memberlist.Node values that
// Members() returns are written concurrently by memberlist.
// alive counts the live members (this node among them).
func (g *gossip) alive() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, m := range g.nodes {
		if m.Alive {
			n++
		}
	}
	return n
}

func (g *gossip) members() []Member {
	g.mu.Lock()
	out := make([]Member, 0, len(g.nodes))
	for _, m := range g.nodes {
		out = append(out, m)
	}
	g.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// record copies a node's state; memberlist calls the event delegate with
// its own lock held, so the fields are stable here.
func (g *gossip) record(n *memberlist.Node, alive bool) {
	var mm memberMeta
	if err := json.Unmarshal(n.Meta, &mm); err != nil || mm.RaftAddr == "" {
		return // not a linknode, or metadata not seen yet
	}
	m := Member{
		ID: n.Name, RaftAddr: mm.RaftAddr, HTTPAddr: mm.HTTPAddr,
		GossipAddr: net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port))),
		Alive:      alive, Bootstrapped: mm.Bootstrapped, Full: mm.Full,
		Cluster: mm.Cluster, Incarnation: mm.Incarnation, Level: mm.Level, Leads: mm.Leads,
	}
	g.mu.Lock()
	g.nodes[m.ID] = m
	g.mu.Unlock()
	g.signal()
}

func (g *gossip) signal() {
	select {
	case g.events <- struct{}{}:
	default:
	}
}

// NodeMeta implements memberlist.Delegate.
func (g *gossip) NodeMeta(limit int) []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	b, _ := json.Marshal(g.meta)
	if len(b) > limit {
		return nil
	}
	return b
}

// msgInvalidate prefixes a cache invalidation: the rest is a code.
const msgInvalidate = 'i'

// invalidate gossips that code changed at Raft index version (best effort;
// the caches also expire). Message: 'i', 8-byte version, code.
func (g *gossip) invalidate(code string, version uint64) {
	b := make([]byte, 9, 9+len(code))
	b[0] = msgInvalidate
	binary.BigEndian.PutUint64(b[1:], version)
	g.broadcasts.QueueBroadcast(invalidation(append(b, code...)))
}

type invalidation []byte

func (b invalidation) Invalidates(memberlist.Broadcast) bool { return false }
func (b invalidation) Message() []byte                       { return b }
func (b invalidation) Finished()                             {}

// msgRefused prefixes a refusal sent to one node: the rest is the sender's
// ID, a NUL and the reason.
const msgRefused = 'r'

// refuse tells node id why it is not taken into the cluster.
func (g *gossip) refuse(id, from, reason string) {
	// The address as the event callbacks copied it: the nodes Members
	// returns are memberlist's own records, which it rewrites as gossip
	// arrives (a data race the detector found in CI).
	g.mu.Lock()
	m, ok := g.nodes[id]
	g.mu.Unlock()
	if !ok || !m.Alive {
		return
	}
	host, port, err := net.SplitHostPort(m.GossipAddr)
	if err != nil {
		return
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return
	}
	target := &memberlist.Node{Name: id, Addr: net.ParseIP(host), Port: uint16(p)}
	msg := append([]byte{msgRefused}, from...)
	msg = append(append(msg, 0), reason...)
	if err := g.ml.SendReliable(target, msg); err != nil {
		g.log.Debug("refusal not delivered", "to", id, "err", err)
	}
}

// setCluster records the node's cluster ID in its metadata.
func (g *gossip) setCluster(id string) {
	g.updateMeta(func(m *memberMeta) { m.Cluster = id })
}

// NotifyMsg implements memberlist.Delegate; it runs on memberlist's packet
// loop and must not block.
func (g *gossip) NotifyMsg(b []byte) {
	switch {
	case len(b) > 9 && b[0] == msgInvalidate && g.onInvalidate != nil:
		g.onInvalidate(string(b[9:]), binary.BigEndian.Uint64(b[1:9]))
	case len(b) > 1 && b[0] == msgRefused && g.onRefused != nil:
		from, reason, ok := bytes.Cut(b[1:], []byte{0})
		if ok && len(reason) <= 1024 {
			g.onRefused(string(from), string(reason))
		}
	}
}

// GetBroadcasts implements memberlist.Delegate.
func (g *gossip) GetBroadcasts(overhead, limit int) [][]byte {
	if g.broadcasts == nil {
		return nil
	}
	return g.broadcasts.GetBroadcasts(overhead, limit)
}

// LocalState implements memberlist.Delegate.
func (g *gossip) LocalState(bool) []byte { return nil }

// MergeRemoteState implements memberlist.Delegate.
func (g *gossip) MergeRemoteState([]byte, bool) {}

// NotifyJoin implements memberlist.EventDelegate; it must not block.
func (g *gossip) NotifyJoin(n *memberlist.Node) { g.record(n, true) }

// NotifyLeave implements memberlist.EventDelegate: the node left or was
// declared dead.
func (g *gossip) NotifyLeave(n *memberlist.Node) { g.record(n, false) }

// NotifyUpdate implements memberlist.EventDelegate (metadata changed).
func (g *gossip) NotifyUpdate(n *memberlist.Node) { g.record(n, true) }

// close leaves the cluster politely and stops gossip.
func (g *gossip) close() error {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.leadsWG.Wait()
	_ = g.ml.Leave(2 * time.Second)
	return g.ml.Shutdown()
}

// startGossip starts the node's gossip with its metadata, and joins the
// -join addresses in the background.
func (n *Node) startGossip(advertise string) error {
	var key []byte
	if n.cfg.ClusterKey != nil {
		key = n.cfg.ClusterKey.GossipKey()
	}
	g, err := startGossipOn(gossipConfig{
		NodeID: n.cfg.NodeID, BindAddr: n.cfg.GossipAddr, AdvertiseHost: n.cfg.AdvertiseHost, SecretKey: key,
		Meta: memberMeta{RaftAddr: advertise, HTTPAddr: n.cfg.HTTPAddr, Bootstrapped: n.meta.HasState(),
			Cluster: n.meta.ClusterID(), Incarnation: n.incarnation, Level: n.cfg.FeatureLevel},
		Fast: n.cfg.FastGossip, Logger: n.log, OnInvalidate: n.remote.invalidate, OnRefused: n.admission.refusedBy,
	})
	if err != nil {
		return err
	}
	n.gossip = g
	if len(n.cfg.Join) > 0 {
		n.loop(n.joinLoop)
	}
	return nil
}

// joinLoop contacts the -join addresses until one answers, then keeps
// retrying in the background only while this node sees nobody else.
func (n *Node) joinLoop() {
	backoff := 200 * time.Millisecond
	started, lastErr := time.Now(), time.Time{}
	for {
		joined, err := n.gossip.ml.Join(n.cfg.Join)
		if joined > 0 {
			n.log.Info("joined gossip", "contacted", joined)
			n.startup.setNote("")
			return
		}
		n.startup.setNote(fmt.Sprintf("no -join address answered with this cluster key (%v)", err))
		if time.Since(started) > 10*time.Second && time.Since(lastErr) > 30*time.Second {
			n.log.Error("cannot join: no -join address answered with this cluster key; retrying", "join", n.cfg.Join, "err", err)
			lastErr = time.Now()
		} else {
			n.log.Debug("gossip join failed; retrying", "err", err)
		}
		select {
		case <-n.loops.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}
