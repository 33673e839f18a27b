package raftgroup

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
)

// Server is one member of a group's configuration.
type Server struct {
	ID      string
	Address string
	// Nonvoter marks a member that receives the log but does not vote.
	Nonvoter bool
}

func (s Server) raft() raft.Server {
	suffrage := raft.Voter
	if s.Nonvoter {
		suffrage = raft.Nonvoter
	}
	return raft.Server{Suffrage: suffrage, ID: raft.ServerID(s.ID), Address: raft.ServerAddress(s.Address)}
}

// ChangeTimeout bounds one membership change: raft's future of a change
// may never resolve once the group has lost its quorum.
const ChangeTimeout = 15 * time.Second

// Servers returns the group's latest configuration, committed or not:
// voters and non-voters (staging servers are not used here).
func (g *Group) Servers() ([]Server, error) {
	f := g.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	var out []Server
	for _, s := range f.Configuration().Servers {
		if s.Suffrage != raft.Voter && s.Suffrage != raft.Nonvoter {
			continue
		}
		out = append(out, Server{ID: string(s.ID), Address: string(s.Address), Nonvoter: s.Suffrage == raft.Nonvoter})
	}
	return out, nil
}

// Add adds s to the group as a voter or non-voter; for a member already
// there it changes the address (and suffrage) instead. It returns once the
// change is committed, ctx ends or ChangeTimeout passes. Only the leader
// can change the configuration.
func (g *Group) Add(ctx context.Context, s Server) error {
	var f raft.IndexFuture
	if s.Nonvoter {
		f = g.raft.AddNonvoter(raft.ServerID(s.ID), raft.ServerAddress(s.Address), 0, ChangeTimeout)
	} else {
		f = g.raft.AddVoter(raft.ServerID(s.ID), raft.ServerAddress(s.Address), 0, ChangeTimeout)
	}
	return g.waitChange(ctx, f)
}

// Remove takes the member id out of the group, as Add waits.
func (g *Group) Remove(ctx context.Context, id string) error {
	return g.waitChange(ctx, g.raft.RemoveServer(raft.ServerID(id), 0, ChangeTimeout))
}

func (g *Group) waitChange(ctx context.Context, f raft.Future) error {
	ctx, cancel := context.WithTimeout(ctx, ChangeTimeout)
	defer cancel()
	return WaitFuture(ctx, f)
}

// Info is a group's Raft state as this replica sees it.
type Info struct {
	State        string
	Term         uint64
	AppliedIndex uint64
	CommitIndex  uint64
	LastIndex    uint64
	// LastContact is raft's "last_contact": how long ago a follower last
	// heard from its leader ("never", or "0" on the leader).
	LastContact string
	// Servers is the latest configuration (nil if it could not be read).
	Servers []Server
}

// Info reports the group's Raft state.
func (g *Group) Info() Info {
	stats := g.raft.Stats()
	info := Info{
		State: g.raft.State().String(), AppliedIndex: g.raft.AppliedIndex(),
		CommitIndex: g.raft.CommitIndex(), LastIndex: g.raft.LastIndex(),
		LastContact: stats["last_contact"], Term: g.raft.CurrentTerm(),
	}
	info.Servers, _ = g.Servers()
	return info
}

// LastIndex is the index of the last entry in this replica's log: 0 for a
// group that has never been bootstrapped or joined.
func (g *Group) LastIndex() uint64 { return g.raft.LastIndex() }

// AppliedIndex is the index of the last entry this replica applied.
func (g *Group) AppliedIndex() uint64 { return g.raft.AppliedIndex() }

// Term is the replica's current Raft term.
func (g *Group) Term() uint64 { return g.raft.CurrentTerm() }

// Stats returns raft's status map (state, term, indexes, snapshot indexes,
// last contact).
func (g *Group) Stats() map[string]string { return g.raft.Stats() }
