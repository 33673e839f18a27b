package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/linkraft/linkraft/analytics"
	"github.com/linkraft/linkraft/idrange"
	"github.com/linkraft/linkraft/internal/clusterkey"
	"github.com/linkraft/linkraft/raftgroup"
	"github.com/linkraft/linkraft/shard"
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
	// QuotaBytes bounds the link data in the data dir: Raft logs,
	// snapshots and state files, bbolt free pages not counted, raw visits
	// not counted (AnalyticsConfig.VisitMaxBytes) (default
	// DefaultQuotaBytes; negative: no quota) and MinFreeBytes is the free-space floor of its file system
	// (default DefaultMinFreeBytes; negative: none). Past either, the node's
	// storage alarm refuses writes that grow the state (storage.go).
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
	// RaftLogSegmentBytes is the size of the shared Raft log's segments
	// (0: nodelog.DefaultSegmentSize).
	RaftLogSegmentBytes int64
	// CacheSize, CacheTTL and NegativeTTL configure each shard's cache.
	CacheSize   int
	CacheTTL    time.Duration
	NegativeTTL time.Duration
	// RemoteCacheTTL bounds how long a node caches links of shards it does
	// not host (default 30 s; updates and deletes also evict them through
	// gossip).
	RemoteCacheTTL time.Duration
	// ListScan bounds the index entries a listing examines on each shard
	// for one page (default DefaultListScan: link.ListQuery.Scan).
	ListScan int
	// StateCommitInterval is how long applied entries may wait in a link
	// shard's state file before it commits them (default
	// shard.DefaultCommitInterval; negative: commit every batch before
	// answering it). Raft's log holds them meanwhile: a crash loses nothing
	// acknowledged, and a restart applies them again.
	StateCommitInterval time.Duration
	// ReapAfter, if positive, has the meta leader remove nodes it has seen
	// dead (or never seen in gossip) for this long, one per round, while
	// the live nodes are at least the replication factor (Consul
	// autopilot's dead-server cleanup). 0: an operator removes them.
	ReapAfter time.Duration
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
	// FeatureLevel is the feature level the node gossips (0: this
	// version's, FeatureLevel, which is also the most it may be). A lower
	// one makes it act, to the others, as that level's version would:
	// they hold back what that version cannot apply or keep. Set on every
	// node ahead of a rollback to that version (etcd's downgrade enable).
	FeatureLevel int
}

// AnalyticsConfig configures a node's click pipeline (package analytics):
// clicks are aggregated per shard and code and submitted through the
// shards' Raft groups; raw visits and unknown-code counts stay on the node.
type AnalyticsConfig struct {
	// Visits keeps raw visit records in <DataDir>/visits.db.
	Visits bool
	// VisitRetention is how long raw visits are kept (default 30 days).
	VisitRetention time.Duration
	// VisitMaxBytes bounds the raw visit file's live bytes; past it new
	// raw visits are shed (click counts are not). 0: a quarter of the
	// node's QuotaBytes (DefaultVisitMaxBytes without a quota); -1: no
	// bound. Raw visits are also shed while the file system has less than
	// twice MinFreeBytes free, so that they never bring on the storage
	// alarm.
	VisitMaxBytes int64
	// Buffer bounds the clicks waiting for the pipeline (default 65536).
	Buffer int
	// FlushInterval is how often batches are submitted (default 1 s).
	FlushInterval time.Duration
	// CloseTimeout bounds the last flush when the node closes (default 5 s).
	CloseTimeout time.Duration
	// Observer, if set, receives the pipeline's counters.
	Observer analytics.Observer
}

// withDefaults checks cfg and fills in its defaults.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.DataDir == "" {
		return cfg, errors.New("cluster: DataDir is required")
	}
	if cfg.RaftAddr == "" {
		cfg.RaftAddr = ":7000"
	}
	if cfg.BootstrapExpect == 0 {
		cfg.BootstrapExpect = 1
	}
	if cfg.BootstrapExpect < 1 || cfg.BootstrapExpect > 64 {
		return cfg, fmt.Errorf("cluster: bootstrap-expect must be 1 to 64, got %d", cfg.BootstrapExpect)
	}
	if (cfg.BootstrapExpect > 1 || len(cfg.Join) > 0) && cfg.GossipAddr == "" {
		return cfg, errors.New("cluster: a multi-node cluster needs a gossip address")
	}
	if cfg.ClusterKey == nil && !cfg.Insecure {
		return cfg, errors.New("cluster: no cluster key: give -cluster-key-file (make a key with linknode keygen), or -insecure to run without peer authentication")
	}
	if cfg.ClusterKey == nil && cfg.PeerTLSCert != "" {
		return cfg, errors.New("cluster: peer TLS files need a cluster key as well (it keys gossip)")
	}
	if cfg.Shards == 0 {
		cfg.Shards = 8
	}
	if cfg.Shards < 1 || cfg.Shards > 256 {
		return cfg, fmt.Errorf("cluster: shards must be 1 to 256, got %d", cfg.Shards)
	}
	if cfg.ReplicationFactor == 0 {
		cfg.ReplicationFactor = 3
	}
	if cfg.ReplicationFactor < 1 || cfg.ReplicationFactor > 7 {
		return cfg, fmt.Errorf("cluster: replicas must be 1 to 7, got %d", cfg.ReplicationFactor)
	}
	if cfg.CodeMode == "" {
		cfg.CodeMode = idrange.ModePermuted
	}
	if _, err := idrange.NewCoder(cfg.CodeMode, make([]byte, idrange.KeySize)); err != nil {
		return cfg, fmt.Errorf("cluster: %w", err)
	}
	if cfg.FeatureLevel < 0 || cfg.FeatureLevel > FeatureLevel {
		return cfg, fmt.Errorf("cluster: feature level must be 1 to %d (this version's), got %d", FeatureLevel, cfg.FeatureLevel)
	}
	if cfg.FeatureLevel == 0 {
		cfg.FeatureLevel = FeatureLevel
	}
	for _, c := range cfg.NodeID {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return cfg, fmt.Errorf("cluster: node id %q may contain only A-Z a-z 0-9 - _ .", cfg.NodeID)
		}
	}
	defaultTo(&cfg.ReconcileInterval, time.Second)
	defaultTo(&cfg.RemoteCacheTTL, 30*time.Second)
	defaultTo(&cfg.StorageInterval, time.Second)
	defaultTo(&cfg.ListScan, DefaultListScan)
	if cfg.StateCommitInterval == 0 {
		cfg.StateCommitInterval = shard.DefaultCommitInterval
	}
	if cfg.QuotaBytes == 0 {
		cfg.QuotaBytes = DefaultQuotaBytes
	}
	if cfg.MinFreeBytes == 0 {
		cfg.MinFreeBytes = DefaultMinFreeBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Analytics != nil {
		a := *cfg.Analytics
		defaultTo(&a.VisitRetention, 30*24*time.Hour)
		defaultTo(&a.CloseTimeout, 5*time.Second)
		if a.VisitMaxBytes == 0 {
			a.VisitMaxBytes = DefaultVisitMaxBytes
			if cfg.QuotaBytes > 0 {
				a.VisitMaxBytes = cfg.QuotaBytes / 4
			}
		}
		cfg.Analytics = &a
	}
	return cfg, nil
}

// defaultTo sets *v to d unless it is positive.
func defaultTo[T int | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}
