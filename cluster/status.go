package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/internal/status"
	"github.com/linkraft/linkraft/raftgroup"
)

// NodeInfo describes one member of the cluster.
type NodeInfo struct {
	ID         string `json:"id"`
	HTTPAddr   string `json:"http_addr"`
	RaftAddr   string `json:"raft_addr"`
	GossipAddr string `json:"gossip_addr"`
	Status     string `json:"status"`
}

// GroupInfo describes one Raft group as this node sees it.
type GroupInfo struct {
	ID           string   `json:"id"`
	Leader       string   `json:"leader"`
	Replicas     []string `json:"replicas"`
	State        string   `json:"state"`
	Term         uint64   `json:"term"`
	AppliedIndex uint64   `json:"applied_index"`
	CommitIndex  uint64   `json:"commit_index"`
	LastContact  string   `json:"last_contact"`
	Links        *int     `json:"links,omitempty"`
	LastIndex    uint64   `json:"last_index"`
	// Rejected counts committed entries this replica rejected (bad input
	// that got past a leader's checks) since it started.
	Rejected uint64 `json:"rejected_entries"`
	// Halted is set when this replica stopped applying: it met a command
	// type its version does not know (upgrade it), or state it cannot
	// read (repair it).
	Halted *Halt `json:"halted,omitempty"`
	// Stalled is set while a commit keeps failing (a full disk).
	Stalled *Stall `json:"stalled,omitempty"`
}

// Halt says where and why a group stopped applying on a node.
type Halt struct {
	Index  uint64 `json:"index"`
	Type   uint8  `json:"type"`
	Reason string `json:"reason"`
}

// Stall is a commit that keeps failing (ENOSPC, EIO) and is being retried.
type Stall struct {
	// Index is the last index of the batch.
	Index    uint64    `json:"index"`
	Err      string    `json:"error"`
	Since    time.Time `json:"since"`
	Attempts int       `json:"attempts"`
}

// applyHealth is what both FSMs report about their apply loop.
type applyHealth interface {
	Halted() *fsm.Halt
	Stalled() *fsm.Stall
	Rejected() uint64
}

func withHealth(info GroupInfo, f applyHealth) GroupInfo {
	if h := f.Halted(); h != nil {
		info.Halted = &Halt{Index: h.Index, Type: uint8(h.Type), Reason: h.Reason}
	}
	if s := f.Stalled(); s != nil {
		info.Stalled = &Stall{Index: s.Index, Err: s.Err, Since: s.Since, Attempts: s.Attempts}
	}
	info.Rejected = f.Rejected()
	return info
}

// healthErr says why a group cannot apply, or nil.
func healthErr(name string, f applyHealth) error {
	if h := f.Halted(); h != nil {
		return fmt.Errorf("%w: %s halted at index %d: %s", ErrNotReady, name, h.Index, h.Reason)
	}
	if s := f.Stalled(); s != nil {
		return fmt.Errorf("%w: %s cannot commit index %d since %s (%d attempts): %s", ErrNotReady, name, s.Index, s.Since.Format(time.RFC3339), s.Attempts, s.Err)
	}
	return nil
}

// Status is the cluster as this node sees it (GET /admin/v1/cluster).
type Status struct {
	NodeID    string      `json:"node_id"`
	ClusterID string      `json:"cluster_id"`
	CodeMode  string      `json:"code_mode"`
	Nodes     []NodeInfo  `json:"nodes"`
	Meta      GroupInfo   `json:"meta"`
	Shards    []GroupInfo `json:"shards"`
	Storage   Storage     `json:"storage"`
}

func groupInfo(id string, g *raftgroup.Group) GroupInfo {
	r := g.Info()
	_, leaderID := g.Leader()
	info := GroupInfo{
		ID: id, Leader: leaderID, State: r.State, Term: r.Term,
		AppliedIndex: r.AppliedIndex, CommitIndex: r.CommitIndex, LastIndex: r.LastIndex,
		LastContact: r.LastContact,
	}
	for _, s := range r.Servers {
		info.Replicas = append(info.Replicas, s.ID)
	}
	return info
}

// Status reports the node, the meta group and every shard.
func (n *Node) Status() Status {
	st := Status{
		NodeID: n.cfg.NodeID, ClusterID: n.settings.ClusterID, CodeMode: n.settings.CodeMode,
		Nodes: n.nodes(), Storage: n.Storage(),
		Meta: withHealth(groupInfo("meta", n.meta), n.metaFSM),
	}
	for _, s := range n.localShards() {
		info := withHealth(groupInfo(s.ID().String(), s.Group()), s.FSM())
		if c, err := s.FSM().Count(); err == nil {
			info.Links = &c
		}
		st.Shards = append(st.Shards, info)
	}
	return st
}

// ErrNotReady is wrapped by Ready's error.
var ErrNotReady = errors.New("not ready")

// Ready returns nil when every group hosted here has a leader and this node
// has applied everything it knew to be committed when Ready was called;
// otherwise the reason. A group that is merely applying a fresh write is
// waited for (within ctx), so readiness does not flap under load; one still
// replaying its log after a restart makes the node not ready when ctx ends.
func (n *Node) Ready(ctx context.Context) error {
	check := func(name string, g *raftgroup.Group, f applyHealth) error {
		if err := healthErr(name, f); err != nil {
			return err
		}
		if addr, _ := g.Leader(); addr == "" {
			return fmt.Errorf("%w: %s has no leader", ErrNotReady, name)
		}
		if err := g.WaitCaughtUp(ctx); err != nil {
			return fmt.Errorf("%w: %s is applying its log", ErrNotReady, name)
		}
		return nil
	}
	if r := n.Refusal(); r != "" {
		return fmt.Errorf("%w: %s", ErrNotReady, r)
	}
	if e := n.muxErr.Load(); e != nil {
		return fmt.Errorf("%w: peer port stopped: %w", ErrNotReady, *e)
	}
	if err := check("meta", n.meta, n.metaFSM); err != nil {
		return err
	}
	for _, s := range n.localShards() {
		if err := check("shard "+s.ID().String(), s.Group(), s.FSM()); err != nil {
			return err
		}
	}
	return nil
}

// nodes lists the members: from gossip when it runs, with those the meta
// group knows but gossip does not reported as "unknown".
func (n *Node) nodes() []NodeInfo {
	self := NodeInfo{ID: n.cfg.NodeID, HTTPAddr: n.cfg.HTTPAddr, RaftAddr: n.mux.Addr(), GossipAddr: n.cfg.GossipAddr, Status: "alive"}
	if n.gossip == nil {
		return []NodeInfo{self}
	}
	self.GossipAddr = n.gossip.Addr()
	seen := map[string]bool{}
	var out []NodeInfo
	for _, m := range n.gossip.members() {
		st := "alive"
		if !m.Alive {
			st = "failed"
		}
		seen[m.ID] = true
		out = append(out, NodeInfo{ID: m.ID, HTTPAddr: m.HTTPAddr, RaftAddr: m.RaftAddr, GossipAddr: m.GossipAddr, Status: st})
	}
	if addrs, err := n.metaAddresses(); err == nil {
		for id, a := range addrs {
			if !seen[id] {
				out = append(out, NodeInfo{ID: id, RaftAddr: a, Status: "unknown"})
			}
		}
	}
	if len(out) == 0 {
		return []NodeInfo{self}
	}
	return out
}

// Digests sums up this node's replica of the meta group and of every shard
// it hosts (GET /admin/v1/digest): replicas of a group at the same applied
// index must agree.
func (n *Node) Digests() ([]status.Digest, error) {
	d, err := n.metaFSM.Digest()
	if err != nil {
		return nil, err
	}
	out := []status.Digest{{Group: "meta", AppliedIndex: d.AppliedIndex, Items: d.Items, Sum: d.Sum}}
	for _, s := range n.localShards() {
		d, err := s.FSM().Digest()
		if err != nil {
			return nil, err
		}
		out = append(out, status.Digest{Group: s.ID().String(), AppliedIndex: d.AppliedIndex, Items: d.Items, Sum: d.Sum})
	}
	return out, nil
}

// ApplyHealth sums the apply health of every group hosted here: entries
// rejected, groups halted at an unknown command type, groups whose commit
// is being retried.
func (n *Node) ApplyHealth() (rejected uint64, halted, stalled int) {
	fs := []applyHealth{n.metaFSM}
	for _, s := range n.localShards() {
		fs = append(fs, s.FSM())
	}
	for _, f := range fs {
		rejected += f.Rejected()
		if f.Halted() != nil {
			halted++
		}
		if f.Stalled() != nil {
			stalled++
		}
	}
	return rejected, halted, stalled
}
