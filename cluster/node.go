package cluster

import (
	"cmp"
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
	"github.com/maypok86/otter/v2"

	"github.com/linkraft/linkraft/analytics"
	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/idrange"
	"github.com/linkraft/linkraft/internal/atomicfile"
	"github.com/linkraft/linkraft/internal/clusterkey"
	"github.com/linkraft/linkraft/internal/peertls"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/peer"
	"github.com/linkraft/linkraft/raftgroup"
	"github.com/linkraft/linkraft/shard"
	"github.com/linkraft/linkraft/transport"
)

// Config configures a Node.
type Config struct {
	// NodeID is the node's stable Raft server ID. Empty: read from
	// <DataDir>/node-id, or generated and stored there on first start.
	NodeID string
	// DataDir holds every file of the node.
	DataDir string
	// RaftAddr is the peer port's bind address (":7000"; ":0" for tests).
	RaftAddr string
	// AdvertiseHost is the host peers use to reach this node; empty means
	// the bind host, or 127.0.0.1 when the bind host is unspecified.
	AdvertiseHost string
	// HTTPAddr is reported to other nodes and in the cluster status.
	HTTPAddr string
	// GossipAddr is memberlist's bind address; empty runs without gossip
	// (a single node that nobody can join).
	GossipAddr string
	// ClusterKey is the cluster's shared secret (internal/clusterkey). It
	// keys gossip encryption and, unless the PeerTLS files are given, the
	// CA of the peer port's mutual TLS. Nil is allowed only with Insecure.
	ClusterKey *clusterkey.Key
	// PeerTLSCA, PeerTLSCert and PeerTLSKey are an operator's PKI for the
	// peer port instead of the key-derived CA: a CA bundle and this node's
	// certificate (its Common Name is the node ID) and key.
	PeerTLSCA, PeerTLSCert, PeerTLSKey string
	// Insecure runs without a cluster key: the peer and gossip ports
	// accept anyone who reaches them, in clear. Tests and demos only.
	Insecure bool
	// QuotaBytes bounds the data dir (default DefaultQuotaBytes; negative:
	// no quota) and MinFreeBytes is the free-space floor of its file system
	// (default DefaultMinFreeBytes; negative: none). Past either, the node's
	// storage alarm refuses writes that grow the state (space.go).
	QuotaBytes, MinFreeBytes int64
	// StorageInterval is how often storage is measured (default 1 s).
	StorageInterval time.Duration
	// FastGossip uses memberlist's local-network timers (tests).
	FastGossip bool
	// Join lists gossip addresses of existing nodes to contact.
	Join []string
	// BootstrapExpect is how many nodes form the first cluster (1 = this
	// node alone).
	BootstrapExpect int
	// Shards is the shard count, fixed at bootstrap (default 8).
	Shards int
	// ReplicationFactor is the replicas per shard, fixed at bootstrap
	// (default 3, capped at the cluster size when placing).
	ReplicationFactor int
	// CodeMode is the code mode, fixed at bootstrap (default permuted).
	CodeMode idrange.Mode
	// IDBlockSize is how many IDs one lease takes (default 1024).
	IDBlockSize uint64
	// Timing overrides the Raft timers of every group.
	Timing raftgroup.Timing
	// Snapshots overrides the shard groups' snapshot policy (zero fields:
	// raftgroup.DefaultSnapshots).
	Snapshots raftgroup.SnapshotPolicy
	// CacheSize, CacheTTL and NegativeTTL configure each shard's cache.
	CacheSize   int
	CacheTTL    time.Duration
	NegativeTTL time.Duration
	// RemoteCacheTTL bounds how long a node caches links of shards it does
	// not host (default 30 s; updates and deletes also evict them through
	// gossip).
	RemoteCacheTTL time.Duration
	// ListScan bounds the index entries a listing examines on each shard
	// for one page (default 10,000: link.ListQuery.Scan).
	ListScan int
	// ReconcileInterval is how often leaders reconcile membership and
	// placement (default 1 s; gossip events trigger it sooner).
	ReconcileInterval time.Duration
	// AdminKey is the secret of the cluster's first admin API key, taken
	// by the node that makes it (the meta leader, once per cluster). Empty:
	// that node makes one and writes it to AdminKeyFile.
	AdminKey string
	// AdminKeyFile is where a made first admin key is written (mode 0600;
	// default <DataDir>/admin.key).
	AdminKeyFile string
	// Analytics, if set, turns click analytics on (analytics.go).
	Analytics *AnalyticsConfig
	// Observer receives shard measurements (may be nil).
	Observer shard.Observer
	// Logger receives the node's logs.
	Logger *slog.Logger

	// level, if set, is the feature level gossiped instead of
	// featureLevel: this package's tests play an older version with it.
	level int
}

// maxMetaVoters bounds the voters of the meta group; other nodes follow it
// as non-voters so that every node has the placement locally.
const maxMetaVoters = 5

// Node is one linknode: its peer port, gossip, the meta group and the
// shards placed on it.
type Node struct {
	cfg Config
	log *slog.Logger

	transfers transferGate // the leader loop's balancing backoff

	mux       *transport.Mux
	verifyRPC func(net.Conn, raft.RPCHeader) error // nil when insecure
	muxCancel context.CancelFunc
	muxDone   chan struct{}
	muxErr    atomic.Pointer[error] // set if the peer port stopped serving
	gossip    *gossip
	peers     *peer.Client

	// lifetime ends when Close starts; background loops and RPC handlers
	// watch it.
	lifetime context.Context
	stopAll  context.CancelFunc
	// loops ends first on Close: the background loops stop before the
	// node hands off its leaderships, while RPC still serves.
	loops     context.Context
	stopLoops context.CancelFunc
	bg        sync.WaitGroup // background loops
	rpcWG     sync.WaitGroup // the RPC server

	meta     *raftgroup.Group
	metaFSM  *fsm.MetaFSM
	settings *command.Settings
	ring     *Ring
	coder    *idrange.Coder
	alloc    *idrange.Allocator

	// The click pipeline and visit store (analytics.go), nil when off;
	// set in Open before any goroutine that reads them starts.
	clicks    *analytics.Pipeline
	visits    *analytics.VisitStore
	stopPurge func() // stops the visit purge loop and waits for it
	enricher  *analytics.Enricher

	// shards is indexed by shard id, nil where not hosted here; replaced
	// whole (under shardsMu) when a shard opens, so the redirect path reads
	// it with one atomic load.
	shardsMu sync.Mutex
	shards   atomic.Pointer[[]*shard.Shard]

	// leaderHints sends writes to groups this node does not host straight
	// to their leader (route.go); relayed counts the forwarded writes this
	// node passed on to another node.
	leaderHints leaderHints
	relayed     atomic.Uint64

	// remote caches links of shards this node does not host, for
	// RemoteCacheTTL; gossip invalidations evict updated and deleted codes.
	remote *otter.Cache[string, remoteEntry]

	storage atomic.Pointer[Storage] // the last measurement (space.go)

	// incarnation is the ID of this data dir (identity.go); refusal is
	// why the cluster refused this node, if it did.
	incarnation string
	// registry is the meta FSM for the peer-port handshakes, which start
	// before openMeta has set metaFSM.
	registry   atomic.Pointer[fsm.MetaFSM]
	refusal    atomic.Pointer[string]
	refusedLog refusalLog
	keyCache   keyCache
	formState  formation // this node's promise while the cluster forms
	// startup says what Open is waiting for (StartupStatus).
	startup     atomic.Pointer[string]
	startupNote atomic.Pointer[string] // joinLoop's trouble, added to it

	closeOnce sync.Once
	closeErr  error
}

// New validates cfg and returns a Node; Open starts it.
func New(cfg Config) (*Node, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("cluster: DataDir is required")
	}
	if cfg.RaftAddr == "" {
		cfg.RaftAddr = ":7000"
	}
	if cfg.BootstrapExpect == 0 {
		cfg.BootstrapExpect = 1
	}
	if cfg.BootstrapExpect < 1 || cfg.BootstrapExpect > 64 {
		return nil, fmt.Errorf("cluster: bootstrap-expect must be 1 to 64, got %d", cfg.BootstrapExpect)
	}
	if (cfg.BootstrapExpect > 1 || len(cfg.Join) > 0) && cfg.GossipAddr == "" {
		return nil, errors.New("cluster: a multi-node cluster needs a gossip address")
	}
	if cfg.ClusterKey == nil && !cfg.Insecure {
		return nil, errors.New("cluster: no cluster key: give -cluster-key-file (make a key with linknode keygen), or -insecure to run without peer authentication")
	}
	if cfg.ClusterKey == nil && cfg.PeerTLSCert != "" {
		return nil, errors.New("cluster: peer TLS files need a cluster key as well (it keys gossip)")
	}
	if cfg.Shards == 0 {
		cfg.Shards = 8
	}
	if cfg.Shards < 1 || cfg.Shards > 256 {
		return nil, fmt.Errorf("cluster: shards must be 1 to 256, got %d", cfg.Shards)
	}
	if cfg.ReplicationFactor == 0 {
		cfg.ReplicationFactor = 3
	}
	if cfg.ReplicationFactor < 1 || cfg.ReplicationFactor > 7 {
		return nil, fmt.Errorf("cluster: replicas must be 1 to 7, got %d", cfg.ReplicationFactor)
	}
	if cfg.CodeMode == "" {
		cfg.CodeMode = idrange.ModePermuted
	}
	if _, err := idrange.NewCoder(cfg.CodeMode, make([]byte, idrange.KeySize)); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if cfg.ReconcileInterval <= 0 {
		cfg.ReconcileInterval = time.Second
	}
	if cfg.RemoteCacheTTL <= 0 {
		cfg.RemoteCacheTTL = 30 * time.Second
	}
	if cfg.ListScan <= 0 {
		cfg.ListScan = DefaultListScan
	}
	if cfg.QuotaBytes == 0 {
		cfg.QuotaBytes = DefaultQuotaBytes
	}
	if cfg.MinFreeBytes == 0 {
		cfg.MinFreeBytes = DefaultMinFreeBytes
	}
	if cfg.StorageInterval <= 0 {
		cfg.StorageInterval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Analytics != nil {
		cfg.Analytics = cfg.Analytics.withDefaults()
	}
	for _, c := range cfg.NodeID {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return nil, fmt.Errorf("cluster: node id %q may contain only A-Z a-z 0-9 - _ .", cfg.NodeID)
		}
	}
	remote, err := otter.New(&otter.Options[string, remoteEntry]{
		MaximumSize:      100_000,
		ExpiryCalculator: otter.ExpiryWriting[string, remoteEntry](cfg.RemoteCacheTTL),
	})
	if err != nil {
		return nil, err
	}
	lifetime, stop := context.WithCancel(context.Background())
	loops, stopLoops := context.WithCancel(lifetime)
	return &Node{cfg: cfg, log: cfg.Logger, lifetime: lifetime, stopAll: stop, loops: loops, stopLoops: stopLoops, remote: remote}, nil
}

// nodeID returns the configured ID, or the one stored in the data dir, or a
// new one that is stored there.
func (n *Node) loadNodeID() (string, error) {
	p := filepath.Join(n.cfg.DataDir, "node-id")
	stored, err := os.ReadFile(p)
	switch {
	case err == nil:
		id := strings.TrimSpace(string(stored))
		if n.cfg.NodeID != "" && n.cfg.NodeID != id {
			return "", fmt.Errorf("cluster: data dir %s belongs to node %q, not %q", n.cfg.DataDir, id, n.cfg.NodeID)
		}
		return id, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", err
	}
	id := n.cfg.NodeID
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

func writeFileSync(path string, data []byte) error { return atomicfile.Write(path, data, 0o600) }

// Open starts the node: the peer port and internal RPC, gossip, the meta
// group (formed on first start, see form), the cluster settings and
// placement (written by the meta leader), the shards placed here, and the
// ID allocator. It returns once the settings are known and every group
// hosted here has a leader, or ctx ends.
func (n *Node) Open(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			_ = n.Close()
		}
	}()
	n.setStartup("opening its data dir and peer port")
	if err := os.MkdirAll(n.cfg.DataDir, 0o750); err != nil {
		return err
	}
	id, err := n.loadNodeID()
	if err != nil {
		return err
	}
	n.cfg.NodeID = id
	n.log = n.log.With("node", id)
	if n.incarnation, err = n.loadIncarnation(); err != nil {
		return err
	}
	if err := n.formState.load(formationPath(n.cfg.DataDir)); err != nil {
		return fmt.Errorf("cluster: formation state: %w", err)
	}
	if err := n.openAnalytics(); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", n.cfg.RaftAddr)
	if err != nil {
		return fmt.Errorf("cluster: listen on raft address: %w", err)
	}
	advertise, err := AdvertiseAddr(ln.Addr().String(), n.cfg.AdvertiseHost)
	if err != nil {
		ln.Close()
		return err
	}
	tcfg := transport.Config{Listener: ln, Advertise: advertise, Logger: n.log.With("component", "mux")}
	if n.cfg.ClusterKey != nil {
		ident, err := peertls.New(peertls.Config{
			NodeID: id, ClusterKey: n.cfg.ClusterKey, Incarnation: n.incarnation, VerifyPeer: n.verifyPeer,
			CAFile: n.cfg.PeerTLSCA, CertFile: n.cfg.PeerTLSCert, KeyFile: n.cfg.PeerTLSKey,
		})
		if err != nil {
			ln.Close()
			return fmt.Errorf("cluster: peer TLS: %w", err)
		}
		tcfg.ServerTLS, tcfg.ClientTLS = ident.ServerConfig(), ident.ClientConfig()
		n.verifyRPC = verifyPeerRPC
	}
	n.mux, err = transport.New(tcfg)
	if err != nil {
		ln.Close()
		return err
	}
	n.peers = newPeerClient(n.mux)
	muxCtx, cancel := context.WithCancel(context.Background())
	n.muxCancel, n.muxDone = cancel, make(chan struct{})
	go func() {
		defer close(n.muxDone)
		if err := n.mux.Serve(muxCtx); err != nil {
			n.log.Error("peer port stopped", "err", err)
			n.muxErr.Store(&err)
		}
	}()
	peerLayer, err := n.mux.Layer(transport.KindPeer, 0)
	if err != nil {
		return err
	}
	legacyLayer, err := n.mux.Layer(transport.KindRPC, 0)
	if err != nil {
		peerLayer.Close()
		return err
	}
	if err := n.openMeta(); err != nil {
		peerLayer.Close()
		legacyLayer.Close()
		return err
	}
	// Peer handlers need the meta group; callers that connected meanwhile
	// wait in the layers' backlogs.
	n.servePeers(peerLayer, legacyLayer)
	if n.cfg.GossipAddr != "" {
		var key []byte
		if n.cfg.ClusterKey != nil {
			key = n.cfg.ClusterKey.GossipKey()
		}
		n.gossip, err = startGossip(gossipConfig{
			NodeID: id, BindAddr: n.cfg.GossipAddr, AdvertiseHost: n.cfg.AdvertiseHost, SecretKey: key,
			Meta: memberMeta{RaftAddr: advertise, HTTPAddr: n.cfg.HTTPAddr, Bootstrapped: n.metaHasState(),
				Cluster: n.storedClusterID(), Incarnation: n.incarnation, Level: cmp.Or(n.cfg.level, featureLevel)},
			Fast: n.cfg.FastGossip, Logger: n.log, OnInvalidate: n.invalidateRemote, OnRefused: n.refusedBy,
		})
		if err != nil {
			return err
		}
		if len(n.cfg.Join) > 0 {
			n.bg.Add(1)
			go n.joinLoop()
		}
	}
	if err := n.form(ctx, advertise); err != nil {
		return err
	}
	n.setStartup("waiting for the meta group's leader")
	if err := n.meta.WaitLeader(ctx); err != nil {
		return fmt.Errorf("cluster: meta group has no leader: %w", err)
	}
	n.setStartup("waiting for the cluster settings and placement")
	if n.gossip != nil {
		n.gossip.setBootstrapped()
	}
	n.bg.Add(1)
	go n.leaderLoop()
	n.checkStorage()
	n.bg.Add(1)
	go n.storageLoop()

	if err := n.waitSettings(ctx); err != nil {
		return err
	}
	if n.gossip != nil {
		n.gossip.setCluster(n.settings.ClusterID)
	}
	if err := n.syncShards(); err != nil {
		return err
	}
	n.bg.Add(1)
	go n.placementLoop()
	n.setStartup("waiting for a leader in every group hosted here")
	for _, s := range n.localShards() {
		if err := s.Group().WaitLeader(ctx); err != nil {
			return fmt.Errorf("cluster: shard %d has no leader: %w", s.ID(), err)
		}
	}
	n.alloc, err = idrange.NewAllocator(idrange.AllocatorConfig{Leaser: idrange.LeaserFunc(n.leaseRange), BlockSize: n.cfg.IDBlockSize})
	if err != nil {
		return err
	}
	n.log.Info("node open", "raft_addr", advertise, "shards", n.settings.Shards, "hosted", len(n.localShards()),
		"code_mode", n.settings.CodeMode, "cluster_id", n.settings.ClusterID)
	return nil
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

func (n *Node) groupDir(parts ...string) string {
	return filepath.Join(append([]string{n.cfg.DataDir}, parts...)...)
}

func (n *Node) openMeta() error {
	dir := n.groupDir("meta")
	f, err := fsm.NewMetaFSM(fsm.MetaConfig{Path: filepath.Join(dir, "state.db"), Logger: n.log.With("group", "meta")})
	if err != nil {
		return fmt.Errorf("cluster: open the meta group (%s): %w. If the other nodes are healthy, stop this node, run `linknode repair-shard -data-dir %s meta` and start it again",
			dir, err, n.cfg.DataDir)
	}
	n.registry.Store(f) // handshakes check the registry from now on
	layer, err := n.mux.Layer(transport.KindRaft, uint64(command.MetaGroup))
	if err != nil {
		f.Close()
		return err
	}
	g, err := raftgroup.Open(raftgroup.Config{
		Name: "meta", NodeID: n.cfg.NodeID, Dir: dir, FSM: f,
		Stream: transport.RaftLayer{Layer: layer}, VerifyRPC: n.verifyRPC, Timing: n.cfg.Timing, Logger: n.log,
	})
	if err != nil {
		f.Close()
		layer.Close()
		return err
	}
	n.meta, n.metaFSM = g, f
	return nil
}

// metaHasState reports whether this node's meta group has ever had a
// configuration: it belongs to a formed cluster.
func (n *Node) metaHasState() bool {
	return n.meta.LastIndex() > 0
}

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
	r, err := n.retryUnknown(ctx, command.MetaGroup, (&command.LeaseRange{Node: n.cfg.NodeID, N: count}).Encode())
	if err != nil {
		return 0, 0, err
	}
	n.log.Debug("leased id range", "start", r.LeaseStart, "end", r.LeaseEnd)
	return r.LeaseStart, r.LeaseEnd, nil
}

// ID returns the node's Raft server ID.
func (n *Node) ID() string { return n.cfg.NodeID }

// RaftAddr returns the advertised peer address.
func (n *Node) RaftAddr() string { return n.mux.Addr() }

// Settings returns the cluster settings.
func (n *Node) Settings() command.Settings { return *n.settings }

// shardOf returns the shard id of code.
func (n *Node) shardOf(code string) command.ShardID { return n.ring.Locate(code) }

// Close stops the background loops and the allocator, leaves gossip, and
// stops every shard group, the meta group and the peer port, in that order.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		// The last click batches go out while every group still runs.
		errs := []error{n.closeAnalytics()}
		// Then leave gossip, so peers see this node go and stop choosing
		// it as the target of leader balancing.
		if n.gossip != nil {
			errs = append(errs, n.gossip.close())
		}
		n.stopLoops()
		n.bg.Wait()           // no loop may open a shard or propose after this
		n.handOffLeadership() // RPC still serves calls forwarded meanwhile
		n.stopAll()
		if n.alloc != nil {
			n.alloc.Close()
		}
		shards := n.localShards()
		var wg sync.WaitGroup
		shardErrs := make([]error, len(shards))
		for i, s := range shards {
			wg.Add(1)
			go func() {
				defer wg.Done()
				shardErrs[i] = s.Close()
			}()
		}
		wg.Wait()
		errs = append(errs, shardErrs...)
		if n.meta != nil {
			errs = append(errs, n.meta.Close())
		} else if n.metaFSM != nil {
			errs = append(errs, n.metaFSM.Close())
		}
		if n.mux != nil {
			n.muxCancel()
			errs = append(errs, n.mux.Close())
			<-n.muxDone
		}
		n.rpcWG.Wait()
		if n.peers != nil {
			n.peers.Close()
		}
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

// handOffLeadership moves the leadership of every group this node leads to
// another voter before it stops, so clients see a leader change of one
// election's length at most instead of a failure timeout (Consul's
// leadershipTransfer, rqlite's Stepdown). Bounded by five seconds in all.
func (n *Node) handOffLeadership() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	groups := []*raftgroup.Group{}
	for _, s := range n.localShards() {
		groups = append(groups, s.Group())
	}
	if n.meta != nil {
		groups = append(groups, n.meta)
	}
	var wg sync.WaitGroup
	for _, g := range groups {
		if !g.IsLeader() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.TransferLeadership(ctx, "", ""); err != nil {
				n.log.Warn("leadership hand-off before stop", "group", g.Name(), "err", err)
			}
		}()
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

// errNotHosted is returned by RPC handlers asked about a group this node does
// not host.
var errNotHosted = fmt.Errorf("%w: group not hosted on this node", link.ErrUnavailable)
