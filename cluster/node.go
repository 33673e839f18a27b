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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/idrange"
	"github.com/linkraft/linkraft/link"
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
	// HTTPAddr and GossipAddr are reported in the cluster status.
	HTTPAddr   string
	GossipAddr string
	// BootstrapExpect is how many nodes form the first cluster. Only 1 is
	// supported so far.
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
	Timing shard.Timing
	// CacheSize, CacheTTL and NegativeTTL configure each shard's cache.
	CacheSize   int
	CacheTTL    time.Duration
	NegativeTTL time.Duration
	// Observer receives shard measurements (may be nil).
	Observer shard.Observer
	// Logger receives the node's logs.
	Logger *slog.Logger
}

// Group ids on the peer port: the meta group is 0, shard s is s+1.
const metaGroupID = 0

func shardGroupID(s int) uint64 { return uint64(s) + 1 }

// Node is one linknode: its peer port, the meta group and its shards.
type Node struct {
	cfg Config
	log *slog.Logger

	mux       *transport.Mux
	muxCancel context.CancelFunc
	muxDone   chan struct{}
	muxErr    atomic.Pointer[error] // set if the peer port stopped serving

	meta     *shard.Group
	metaFSM  *fsm.MetaFSM
	settings *fsm.Settings
	ring     *shard.Ring
	coder    *idrange.Coder
	alloc    *idrange.Allocator
	shards   []*shard.Shard // index = shard id; nil if not hosted here

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
	if cfg.BootstrapExpect != 1 {
		return nil, fmt.Errorf("cluster: bootstrap-expect %d: multi-node clusters are not implemented yet; use 1", cfg.BootstrapExpect)
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
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Node{cfg: cfg, log: cfg.Logger}, nil
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

func writeFileSync(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Open starts the node: the peer port, the meta group (bootstrapped on first
// start), the cluster settings, the shards, and the ID allocator. It returns
// once every group hosted here has a leader, or ctx ends.
func (n *Node) Open(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			_ = n.Close()
		}
	}()
	if err := os.MkdirAll(n.cfg.DataDir, 0o750); err != nil {
		return err
	}
	id, err := n.loadNodeID()
	if err != nil {
		return err
	}
	n.cfg.NodeID = id
	n.log = n.log.With("node", id)

	ln, err := net.Listen("tcp", n.cfg.RaftAddr)
	if err != nil {
		return fmt.Errorf("cluster: listen on raft address: %w", err)
	}
	advertise, err := advertiseAddr(ln.Addr().String(), n.cfg.AdvertiseHost)
	if err != nil {
		ln.Close()
		return err
	}
	n.mux, err = transport.New(transport.Config{Listener: ln, Advertise: advertise, Logger: n.log.With("component", "mux")})
	if err != nil {
		ln.Close()
		return err
	}
	muxCtx, cancel := context.WithCancel(context.Background())
	n.muxCancel, n.muxDone = cancel, make(chan struct{})
	go func() {
		defer close(n.muxDone)
		if err := n.mux.Serve(muxCtx); err != nil {
			n.log.Error("peer port stopped", "err", err)
			n.muxErr.Store(&err)
		}
	}()

	self := []shard.Server{{ID: id, Address: advertise}}
	if err := n.openMeta(ctx, self); err != nil {
		return err
	}
	if err := n.loadSettings(ctx); err != nil {
		return err
	}
	if err := n.openShards(ctx, self); err != nil {
		return err
	}
	n.alloc, err = idrange.NewAllocator(idrange.AllocatorConfig{Leaser: idrange.LeaserFunc(n.leaseRange), BlockSize: n.cfg.IDBlockSize})
	if err != nil {
		return err
	}
	n.log.Info("node open", "raft_addr", advertise, "shards", n.settings.Shards, "code_mode", n.settings.CodeMode, "cluster_id", n.settings.ClusterID)
	return nil
}

func advertiseAddr(bound, host string) (string, error) {
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

func (n *Node) openGroupDir(parts ...string) string {
	return filepath.Join(append([]string{n.cfg.DataDir}, parts...)...)
}

func (n *Node) openMeta(ctx context.Context, self []shard.Server) error {
	dir := n.openGroupDir("meta")
	f, err := fsm.NewMetaFSM(filepath.Join(dir, "state.db"))
	if err != nil {
		return err
	}
	layer, err := n.mux.Layer(transport.KindRaft, metaGroupID)
	if err != nil {
		f.Close()
		return err
	}
	g, err := shard.OpenGroup(shard.GroupConfig{
		Name: "meta", NodeID: n.cfg.NodeID, Dir: dir, FSM: f,
		Stream: transport.RaftLayer{Layer: layer}, Timing: n.cfg.Timing, Logger: n.log,
	})
	if err != nil {
		f.Close()
		layer.Close()
		return err
	}
	n.meta, n.metaFSM = g, f
	// A no-op when the group has state: a restarted node never bootstraps.
	if err := g.Bootstrap(self); err != nil {
		return fmt.Errorf("cluster: bootstrap meta group: %w", err)
	}
	if err := g.WaitLeader(ctx); err != nil {
		return fmt.Errorf("cluster: meta group has no leader: %w", err)
	}
	return nil
}

// loadSettings reads the cluster settings from the meta FSM; on first start
// the meta leader proposes them. Flags that differ from stored settings are
// reported and ignored: shard count, ring and code mode are fixed at
// bootstrap.
func (n *Node) loadSettings(ctx context.Context) error {
	s, err := n.metaFSM.Settings()
	if err != nil {
		return err
	}
	if s == nil {
		if err := n.meta.WaitReady(ctx); err != nil {
			return fmt.Errorf("cluster: meta group not ready for bootstrap: %w", err)
		}
		key := make([]byte, idrange.KeySize)
		if _, err := rand.Read(key); err != nil {
			return err
		}
		var cid [8]byte
		if _, err := rand.Read(cid[:]); err != nil {
			return err
		}
		want := fsm.Settings{
			ClusterID:         hex.EncodeToString(cid[:]),
			Shards:            uint32(n.cfg.Shards),
			PartitionCount:    shard.DefaultPartitionCount,
			ReplicationFactor: uint32(n.cfg.ReplicationFactor),
			Load:              shard.DefaultLoad,
			CodeMode:          string(n.cfg.CodeMode),
			CodeKey:           key,
			CreatedAt:         time.Now().UTC(),
			RingVNodes:        shard.DefaultVNodes,
			RingHasher:        shard.DefaultHasher,
		}
		resp, _, err := n.meta.Apply(ctx, (&fsm.SetSettings{Settings: want}).Encode())
		if err != nil {
			return fmt.Errorf("cluster: store settings: %w", err)
		}
		s = resp.(*fsm.SettingsResult).Settings
		n.log.Info("cluster bootstrapped", "cluster_id", s.ClusterID, "shards", s.Shards, "code_mode", s.CodeMode)
	} else {
		if int(s.Shards) != n.cfg.Shards {
			n.log.Warn("shard count is fixed at bootstrap; flag ignored", "stored", s.Shards, "flag", n.cfg.Shards)
		}
		if s.CodeMode != string(n.cfg.CodeMode) {
			n.log.Warn("code mode is fixed at bootstrap; flag ignored", "stored", s.CodeMode, "flag", n.cfg.CodeMode)
		}
	}
	ring, err := shard.NewRing(shard.RingConfig{
		Shards: int(s.Shards), PartitionCount: int(s.PartitionCount), Load: s.Load,
		VNodes: int(s.RingVNodes), Hasher: s.RingHasher,
	})
	if err != nil {
		return err
	}
	coder, err := idrange.NewCoder(idrange.Mode(s.CodeMode), s.CodeKey)
	if err != nil {
		return err
	}
	n.settings, n.ring, n.coder = s, ring, coder
	return nil
}

func (n *Node) openShards(ctx context.Context, self []shard.Server) error {
	n.shards = make([]*shard.Shard, n.settings.Shards)
	for i := range n.shards {
		layer, err := n.mux.Layer(transport.KindRaft, shardGroupID(i))
		if err != nil {
			return err
		}
		s, err := shard.Open(shard.Config{
			ID: i, NodeID: n.cfg.NodeID, Dir: n.openGroupDir("shards", strconv.Itoa(i)),
			Stream: transport.RaftLayer{Layer: layer}, Timing: n.cfg.Timing,
			CacheSize: n.cfg.CacheSize, CacheTTL: n.cfg.CacheTTL, NegativeTTL: n.cfg.NegativeTTL,
			Observer: n.cfg.Observer, Logger: n.log,
		})
		if err != nil {
			layer.Close()
			return fmt.Errorf("cluster: open shard %d: %w", i, err)
		}
		n.shards[i] = s
		if err := s.Group().Bootstrap(self); err != nil {
			return fmt.Errorf("cluster: bootstrap shard %d: %w", i, err)
		}
	}
	for _, s := range n.shards {
		if err := s.Group().WaitLeader(ctx); err != nil {
			return fmt.Errorf("cluster: shard %d has no leader: %w", s.ID(), err)
		}
	}
	return nil
}

// leaseRange leases count IDs through the meta group.
func (n *Node) leaseRange(ctx context.Context, count uint64) (uint64, uint64, error) {
	resp, _, err := n.meta.Apply(ctx, (&fsm.LeaseRange{Node: n.cfg.NodeID, N: count}).Encode())
	if err != nil {
		return 0, 0, err
	}
	r := resp.(*fsm.LeaseResult)
	if r.Err != nil {
		return 0, 0, r.Err
	}
	n.log.Debug("leased id range", "start", r.Start, "end", r.End)
	return r.Start, r.End, nil
}

// ID returns the node's Raft server ID.
func (n *Node) ID() string { return n.cfg.NodeID }

// RaftAddr returns the advertised peer address.
func (n *Node) RaftAddr() string { return n.mux.Addr() }

// Settings returns the cluster settings.
func (n *Node) Settings() fsm.Settings { return *n.settings }

// ShardOf returns the shard id of code.
func (n *Node) ShardOf(code string) int { return n.ring.Locate(code) }

// Close stops the allocator, every shard group, the meta group and the peer
// port, in that order.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		var errs []error
		if n.alloc != nil {
			n.alloc.Close()
		}
		var wg sync.WaitGroup
		shardErrs := make([]error, len(n.shards))
		for i, s := range n.shards {
			if s == nil {
				continue
			}
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
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
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

// errNotHosted is returned when a shard is not hosted on this node (multi-node
// routing comes with the cluster).
var errNotHosted = fmt.Errorf("%w: shard not hosted on this node", link.ErrUnavailable)
