// Package meta is the meta group: the Raft group every node holds a
// replica of (a voter or a non-voter), with the cluster's control plane —
// the settings fixed at bootstrap, the placement of shards on nodes, the
// member registry, the ID leases, API keys and the blocklist — and the
// typed reads of each, answered from this node's replica. Nothing else
// opens its state machine.
//
// Writes are commands (package command) proposed on the meta leader: the
// node's routing (package cluster) forwards them there, or its leader loop
// proposes them itself.
package meta

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/internal/status"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/raftgroup"
	"github.com/linkraft/linkraft/raftgroup/nodelog"
)

// Meta is this node's replica of the meta group.
type Meta struct {
	group *raftgroup.Group
	fsm   *fsm.MetaFSM
	keys  keyCache
}

// StatePath is the meta state file in a meta group's Dir.
func StatePath(dir string) string { return filepath.Join(dir, "state.db") }

// Recover rewrites the configuration of the stopped meta replica in dir to
// the servers in keep, after the group lost a majority for good
// (raftgroup.Recover). nodeID is this replica's node; log is its view of
// the node's shared log, nil when it has its own raft.db in dir.
func Recover(dir, nodeID string, keep []string, log *nodelog.Log) ([]raftgroup.Server, error) {
	f, err := fsm.NewMetaFSM(fsm.MetaConfig{Path: StatePath(dir)})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("%s: %w", dir, raftgroup.ErrInUse)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return raftgroup.Recover(raftgroup.Config{Name: "meta", NodeID: nodeID, Dir: dir, Log: log, FSM: f}, keep)
}

// Open opens the meta state file in cfg.Dir and starts the group's Raft
// as cfg says (Open sets its Name and FSM).
func Open(cfg raftgroup.Config) (*Meta, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	f, err := fsm.NewMetaFSM(fsm.MetaConfig{Path: StatePath(cfg.Dir), Logger: cfg.Logger.With("group", "meta")})
	if err != nil {
		return nil, err
	}
	cfg.Name, cfg.FSM = "meta", f
	g, err := raftgroup.Open(cfg)
	if err != nil {
		f.Close()
		return nil, err
	}
	m := &Meta{group: g, fsm: f}
	m.keys.fsm = f
	return m, nil
}

// Group is the meta group's Raft group: its leadership, membership and
// proposals.
func (m *Meta) Group() *raftgroup.Group { return m.group }

// Close stops the group and closes its file.
func (m *Meta) Close() error { return m.group.Close() }

// HasState reports whether the group ever had a configuration: this node
// belongs to a formed cluster.
func (m *Meta) HasState() bool { return m.group.LastIndex() > 0 }

// Settings returns the cluster settings, or nil before the meta leader
// wrote them.
func (m *Meta) Settings() (*command.Settings, error) { return m.fsm.Settings() }

// ClusterID is the cluster ID of this replica's settings, or "".
func (m *Meta) ClusterID() string {
	s, err := m.fsm.Settings()
	if err != nil || s == nil {
		return ""
	}
	return s.ClusterID
}

// Placement returns the placement, or nil before the first one.
func (m *Meta) Placement() (*command.Placement, error) { return m.fsm.Placement() }

// PlacementAndMembers returns what a new placement is planned from: the
// current placement (nil before the first) and the meta group's members
// with their addresses.
func (m *Meta) PlacementAndMembers() (*command.Placement, map[string]string, error) {
	p, err := m.Placement()
	if err != nil {
		return nil, nil, err
	}
	addrs, err := m.Addresses()
	if err != nil {
		return nil, nil, err
	}
	return p, addrs, nil
}

// Removed returns the nodes an operator removed.
func (m *Meta) Removed() (map[string]bool, error) {
	p, err := m.fsm.Placement()
	if err != nil {
		return nil, err
	}
	removed := map[string]bool{}
	if p != nil {
		for _, id := range p.Removed {
			removed[id] = true
		}
	}
	return removed, nil
}

// Addresses returns node ID → peer address of every member of the meta
// group (every node of the cluster is one).
func (m *Meta) Addresses() (map[string]string, error) {
	servers, err := m.group.Servers()
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(servers))
	for _, s := range servers {
		out[s.ID] = s.Address
	}
	return out, nil
}

// Servers maps node IDs to Raft servers at the addresses the meta group
// holds for them.
func (m *Meta) Servers(ids []string) ([]raftgroup.Server, error) {
	addrs, err := m.Addresses()
	if err != nil {
		return nil, err
	}
	out := make([]raftgroup.Server, 0, len(ids))
	for _, id := range ids {
		a, ok := addrs[id]
		if !ok {
			return nil, fmt.Errorf("node %s is not in the meta group", id)
		}
		out = append(out, raftgroup.Server{ID: id, Address: a})
	}
	return out, nil
}

// ReplicaAddrs returns the peer addresses of the nodes the placement puts
// on shard s, but self.
func (m *Meta) ReplicaAddrs(s command.ShardID, self string) ([]string, error) {
	p, err := m.fsm.Placement()
	if err != nil {
		return nil, err
	}
	if p == nil || s < 0 || int(s) >= len(p.Shards) {
		return nil, fmt.Errorf("%w: no placement for shard %d", link.ErrUnavailable, s)
	}
	addrs, err := m.Addresses()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range p.Shards[s] {
		if a, ok := addrs[id]; ok && id != self {
			out = append(out, a)
		}
	}
	return out, nil
}

// Member is a node of the registry.
type Member struct {
	ID          string
	Incarnation string
	// Level is the feature level recorded when the node was last
	// admitted; 0 if it was registered by a version that did not record
	// levels and has not been admitted since.
	Level        int
	RegisteredAt time.Time
}

func member(m fsm.Member) Member {
	return Member{ID: m.ID, Incarnation: m.Incarnation, Level: m.Level, RegisteredAt: m.RegisteredAt}
}

// Member returns node id's record in the registry, if any.
func (m *Meta) Member(id string) (Member, bool, error) {
	r, ok, err := m.fsm.Member(id)
	return member(r), ok, err
}

// Incarnation returns the incarnation registered for node id, if any.
func (m *Meta) Incarnation(id string) (string, bool, error) {
	r, ok, err := m.fsm.Member(id)
	return r.Incarnation, ok, err
}

// Behind returns a node of the registry or the meta group, not removed,
// whose recorded feature level is below level (0 if none was recorded),
// or "" if there is none.
func (m *Meta) Behind(level int) (string, int, error) {
	levels, err := m.levels()
	if err != nil {
		return "", 0, err
	}
	for _, id := range slices.Sorted(maps.Keys(levels)) {
		if levels[id] < level {
			return id, levels[id], nil
		}
	}
	return "", 0, nil
}

// LowestLevel returns the lowest feature level recorded for a node of the
// registry or the meta group that was not removed (0 for one with none),
// and false if there is no such node.
func (m *Meta) LowestLevel() (int, bool, error) {
	levels, err := m.levels()
	if err != nil || len(levels) == 0 {
		return 0, false, err
	}
	return slices.Min(slices.Collect(maps.Values(levels))), true, nil
}

// levels maps every node of the registry or the meta group that was not
// removed to its recorded feature level (0: none recorded, older than
// the registry).
func (m *Meta) levels() (map[string]int, error) {
	members, err := m.fsm.Members()
	if err != nil {
		return nil, err
	}
	servers, err := m.group.Servers()
	if err != nil {
		return nil, err
	}
	removed, err := m.Removed()
	if err != nil {
		return nil, err
	}
	levels := make(map[string]int, len(members)+len(servers))
	for _, s := range servers {
		levels[s.ID] = 0 // a member the registry does not know: older than it
	}
	for _, r := range members {
		levels[r.ID] = r.Level
	}
	for id := range removed {
		delete(levels, id)
	}
	return levels, nil
}

// NextID returns the first ID no lease has covered, as this replica knows
// it.
func (m *Meta) NextID() (uint64, error) { return m.fsm.NextID() }

// Leases returns every ID range the group has granted, as this replica
// knows them.
func (m *Meta) Leases() ([]status.Lease, error) {
	grants, err := m.fsm.Leases()
	if err != nil {
		return nil, err
	}
	out := make([]status.Lease, len(grants))
	for i, g := range grants {
		out[i] = status.Lease{Index: g.Index, Start: g.Start, End: g.End, Node: g.Node}
	}
	return out, nil
}

// Digest sums up this replica (fsm.MetaFSM.Digest).
func (m *Meta) Digest() (status.Digest, error) {
	d, err := m.fsm.Digest()
	return status.Digest{Group: "meta", AppliedIndex: d.AppliedIndex, Items: d.Items, Sum: d.Sum}, err
}

// Health is what the group's state machine says of its apply loop.
func (m *Meta) Health() status.Health { return m.fsm.Health() }
