package shard

import (
	"fmt"
	"strconv"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"

	"github.com/linkraft/linkraft/command"
)

// RingConfig holds the ring parameters. They are written into the meta group
// at bootstrap and never recomputed, so every node and every restart maps a
// code to the same shard.
type RingConfig struct {
	// Shards is the number of shards (members of the ring).
	Shards int
	// PartitionCount is the fixed number of partitions keys hash into
	// (default 271).
	PartitionCount int
	// Load bounds a member's partitions to ceil(partitions/members × Load)
	// (default 1.25; must be ≥ 1).
	Load float64
	// VNodes is the number of virtual nodes per shard (consistent's
	// ReplicationFactor; default 20).
	VNodes int
	// Hasher names the hash function; only "xxhash64" (the default) exists.
	Hasher string
}

// Ring defaults, as buraksezer/consistent documents them.
const (
	DefaultPartitionCount = 271
	DefaultLoad           = 1.25
	DefaultVNodes         = 20
	DefaultHasher         = "xxhash64"
)

// Ring maps a code to a shard id with buraksezer/consistent v1.1.0 (members
// are shard ids, never nodes; xxhash64; 271 partitions, load 1.25 by
// default). The parameters are written into the meta group at bootstrap, so
// the answer never depends on gossip or on the node asking; a test pins
// known answers. The partition → shard table is computed once, so Locate is
// a hash and two slice reads.
type Ring struct {
	cfg   RingConfig
	owner []command.ShardID // partition → shard
	c     *consistent.Consistent
}

type member string

func (m member) String() string { return string(m) }

type hasher struct{}

func (hasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

// NewRing builds the ring. It returns an error, never panics, for parameters
// the library cannot place.
func NewRing(cfg RingConfig) (r *Ring, err error) {
	if cfg.PartitionCount == 0 {
		cfg.PartitionCount = DefaultPartitionCount
	}
	if cfg.Load == 0 {
		cfg.Load = DefaultLoad
	}
	if cfg.VNodes == 0 {
		cfg.VNodes = DefaultVNodes
	}
	if cfg.Hasher == "" {
		cfg.Hasher = DefaultHasher
	}
	if cfg.Hasher != DefaultHasher {
		return nil, fmt.Errorf("shard ring: unknown hasher %q", cfg.Hasher)
	}
	if cfg.VNodes < 1 || cfg.VNodes > 1000 {
		return nil, fmt.Errorf("shard ring: virtual nodes must be 1 to 1000, got %d", cfg.VNodes)
	}
	if cfg.Shards < 1 || cfg.Shards > 4096 {
		return nil, fmt.Errorf("shard ring: shards must be 1 to 4096, got %d", cfg.Shards)
	}
	if cfg.PartitionCount < cfg.Shards {
		return nil, fmt.Errorf("shard ring: partition count %d is below the shard count %d", cfg.PartitionCount, cfg.Shards)
	}
	if cfg.Load < 1 {
		return nil, fmt.Errorf("shard ring: load factor %v must be at least 1", cfg.Load)
	}
	defer func() {
		if p := recover(); p != nil {
			r, err = nil, fmt.Errorf("shard ring: cannot place %d partitions on %d shards with load %v: %v", cfg.PartitionCount, cfg.Shards, cfg.Load, p)
		}
	}()
	members := make([]consistent.Member, cfg.Shards)
	for i := range members {
		members[i] = member(strconv.Itoa(i))
	}
	c := consistent.New(members, consistent.Config{
		Hasher:            hasher{},
		PartitionCount:    cfg.PartitionCount,
		ReplicationFactor: cfg.VNodes,
		Load:              cfg.Load,
	})
	owner := make([]command.ShardID, cfg.PartitionCount)
	for p := range owner {
		id, err := strconv.Atoi(c.GetPartitionOwner(p).String())
		if err != nil {
			return nil, err
		}
		owner[p] = command.ShardID(id)
	}
	return &Ring{cfg: cfg, owner: owner, c: c}, nil
}

// Config returns the ring's parameters (defaults filled in).
func (r *Ring) Config() RingConfig { return r.cfg }

// Locate returns the shard id of code.
func (r *Ring) Locate(code string) command.ShardID {
	return r.owner[xxhash.Sum64String(code)%uint64(len(r.owner))]
}

// Shards returns the number of shards.
func (r *Ring) Shards() int { return r.cfg.Shards }
