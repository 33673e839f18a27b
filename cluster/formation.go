package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/peer"
	"github.com/linkraft/linkraft/raftgroup"
)

// Forming the first cluster safely, whatever the start order and whoever
// else shows up. Only one node of a start wave may bootstrap the meta
// group, and only with a voter set no other node will ever bootstrap:
//
//   - A new node promises, durably (<data-dir>/formation), to let one
//     proposer form the cluster, and never bootstraps on its own.
//   - The proposer is the lowest ID among the new nodes gossip shows. When it
//     sees at least bootstrap-expect of them and no formed cluster, it asks
//     each for its promise over the RPC. With every one's, it commits
//     (durably: it will bootstrap, and releases no one) and bootstraps the
//     meta group with them as voters (at most five, the lowest IDs; the
//     others are added by the leader like any later node).
//   - A node that promised P and is asked by a lower Q asks P to release it;
//     P agrees unless it has committed, and then starts its collection over.
//     So the lowest proposer gathers everyone, and nobody is bound to two.
//
// Two clusters would need two proposers whose gossip views share no new
// node, each of at least bootstrap-expect nodes: 2×bootstrap-expect new
// nodes split in two from the start. Fewer, in any order, form one cluster
// (TestFormationIsOneClusterInAnyOrder).

// formationState is what a node has promised, kept in its data dir.
type formationState struct {
	// Proposer is the node this one promised to let form the cluster.
	Proposer string `json:"proposer,omitempty"`
	// Committed and Voters: this node is the proposer and has decided to
	// bootstrap with Voters.
	Committed bool     `json:"committed,omitempty"`
	Voters    []string `json:"voters,omitempty"`
}

// formation guards a node's promise and its own collection.
type formation struct {
	n     *Node
	mu    sync.Mutex
	path  string
	state formationState
	// gen counts releases this node granted as a proposer: a collection
	// that saw one is started over.
	gen int
}

func (f *formation) load(path string) error {
	f.path = path
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(b, &f.state)
}

// save persists the state; the caller holds mu.
func (f *formation) save() error {
	b, err := json.Marshal(f.state)
	if err != nil {
		return err
	}
	return writeFileSync(f.path, b)
}

// promise handles proposer's request for this node's promise.
func (f *formation) promise(ctx context.Context, proposer string) (answer, holder string, err error) {
	n := f.n
	if n.meta.HasState() {
		return peer.PromiseFormed, "", nil
	}
	f.mu.Lock()
	cur := f.state.Proposer
	switch {
	case cur == "" || cur == proposer:
		f.state.Proposer = proposer
		err := f.save()
		f.mu.Unlock()
		if err != nil {
			return "", "", err
		}
		return peer.PromiseAccepted, "", nil
	case proposer > cur || f.state.Committed:
		f.mu.Unlock()
		return peer.PromiseRefused, cur, nil
	case cur == n.cfg.NodeID:
		// This node was proposing, uncommitted: a lower proposer wins.
		f.state.Proposer = proposer
		f.gen++
		err := f.save()
		f.mu.Unlock()
		if err != nil {
			return "", "", err
		}
		return peer.PromiseAccepted, "", nil
	}
	f.mu.Unlock()
	// Bound to a higher proposer: ask it to let go.
	if ok := f.askRelease(ctx, cur); !ok {
		return peer.PromiseRefused, cur, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.state.Proposer != cur { // changed meanwhile
		return peer.PromiseRefused, f.state.Proposer, nil
	}
	f.state.Proposer = proposer
	if err := f.save(); err != nil {
		return "", "", err
	}
	return peer.PromiseAccepted, "", nil
}

// release handles a promiser's request to be let go: granted unless this
// node has committed to bootstrap.
func (f *formation) release(promiser string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.state.Committed {
		return false
	}
	f.gen++
	f.n.log.Info("formation: released a promise to a lower proposer", "member", promiser)
	return true
}

// askRelease asks proposer (by its gossip address) to release this node.
func (f *formation) askRelease(ctx context.Context, proposer string) bool {
	n := f.n
	addr := ""
	if n.gossip != nil {
		addr = n.gossip.raftAddr(proposer)
	}
	if addr == "" {
		return false
	}
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	released, err := n.peers.Release(c, addr, n.cfg.NodeID)
	return err == nil && released
}

// propose runs one round of collection as the lowest new node: every new
// node in view must promise; then the proposer commits and bootstraps.
// It returns true once this node has bootstrapped.
func (f *formation) propose(ctx context.Context, fresh []Member) (bool, error) {
	n := f.n
	f.mu.Lock()
	if f.state.Committed {
		voters := f.state.Voters
		f.mu.Unlock()
		return true, f.bootstrapWith(voters, fresh)
	}
	f.mu.Unlock()
	// Promise to itself, as to any proposer (a promise to a higher one is
	// released first).
	answer, _, err := f.promise(ctx, n.cfg.NodeID)
	if err != nil || answer != peer.PromiseAccepted {
		return false, err
	}
	f.mu.Lock()
	gen := f.gen
	f.mu.Unlock()
	var promised []string
	for _, m := range fresh {
		if m.ID == n.cfg.NodeID {
			promised = append(promised, m.ID)
			continue
		}
		c, cancel := context.WithTimeout(ctx, 3*time.Second)
		resp, err := n.peers.Promise(c, m.RaftAddr, n.cfg.NodeID)
		cancel()
		if err != nil {
			return false, nil // unreachable now: try again next round
		}
		switch resp.Answer {
		case peer.PromiseAccepted:
			promised = append(promised, m.ID)
		case peer.PromiseFormed:
			return false, nil // a cluster exists: wait to be added
		default:
			n.log.Debug("formation: promise refused", "member", m.ID, "bound_to", resp.Holder)
			return false, nil
		}
	}
	slices.Sort(promised)
	voters := promised[:min(len(promised), maxMetaVoters)]
	f.mu.Lock()
	if f.gen != gen || f.state.Proposer != n.cfg.NodeID {
		f.mu.Unlock()
		return false, nil // released someone, or yielded, meanwhile
	}
	f.state.Committed, f.state.Voters = true, voters
	err = f.save()
	f.mu.Unlock()
	if err != nil {
		return false, err
	}
	return true, f.bootstrapWith(voters, fresh)
}

// bootstrapWith bootstraps the meta group with voters, at the addresses
// gossip shows.
func (f *formation) bootstrapWith(voters []string, seen []Member) error {
	n := f.n
	addr := map[string]string{}
	for _, m := range seen {
		addr[m.ID] = m.RaftAddr
	}
	for _, m := range n.gossip.members() {
		if _, ok := addr[m.ID]; !ok {
			addr[m.ID] = m.RaftAddr
		}
	}
	var servers []raftgroup.Server
	for _, id := range voters {
		a := addr[id]
		if a == "" {
			return fmt.Errorf("cluster: formation: no address for voter %s", id)
		}
		servers = append(servers, raftgroup.Server{ID: id, Address: a})
	}
	n.log.Info("bootstrapping the meta group", "voters", voters)
	return n.meta.Group().Bootstrap(servers)
}

func formationPath(dataDir string) string { return filepath.Join(dataDir, "formation") }

// form makes sure the meta group has a configuration. A node with state
// never bootstraps again. A single node (bootstrap-expect 1, no -join)
// bootstraps alone. Otherwise the node waits until gossip shows either a
// formed cluster (a member whose meta group has state: then this node waits
// to be added by the meta leader) or bootstrap-expect nodes that are all
// new: then the lowest of them collects every new node's promise and
// bootstraps the meta group with them as voters (formation.go); the others
// are added by its leader.
func (f *formation) form(ctx context.Context, advertise string) error {
	n := f.n
	if n.meta.HasState() {
		return nil
	}
	if n.cfg.BootstrapExpect == 1 && len(n.cfg.Join) == 0 {
		return n.meta.Group().Bootstrap([]raftgroup.Server{{ID: n.cfg.NodeID, Address: advertise}})
	}
	// -join without -bootstrap-expect: join, never bootstrap. A node that
	// cannot reach the cluster waits (and joinLoop says so at ERROR)
	// rather than forming a cluster of its own.
	joinOnly := n.cfg.BootstrapExpect <= 1
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	logged := time.Time{}
	for {
		if n.meta.HasState() {
			return nil // added by a leader, or bootstrapped by a raced peer's log
		}
		members := n.gossip.members()
		var fresh []Member
		formed := false
		for _, m := range members {
			if !m.Alive {
				continue
			}
			if m.Bootstrapped {
				formed = true
			}
			fresh = append(fresh, m)
		}
		if r := n.admission.refusal(); r != "" {
			return fmt.Errorf("cluster: formation: %s", r)
		}
		if formed {
			n.startup.set("waiting to be added to the cluster by the meta leader")
			if time.Since(logged) > 5*time.Second {
				n.log.Info("joining a formed cluster; waiting to be added by the meta leader")
				logged = time.Now()
			}
		} else if !joinOnly && len(fresh) >= n.cfg.BootstrapExpect {
			// fresh is sorted by ID: the lowest proposes (formation.go).
			n.startup.set(fmt.Sprintf("forming the cluster: %s collects the promises of %d new nodes", fresh[0].ID, len(fresh)))
			if fresh[0].ID == n.cfg.NodeID {
				done, err := f.propose(ctx, fresh)
				if err != nil || done {
					return err
				}
			}
		} else {
			if joinOnly {
				n.startup.set(fmt.Sprintf("waiting to join a cluster (-join without -bootstrap-expect never forms one); gossip shows %d node(s)", len(fresh)))
			} else {
				n.startup.set(fmt.Sprintf("waiting for %d new nodes to form the cluster; gossip shows %d", n.cfg.BootstrapExpect, len(fresh)))
			}
		}
		if !formed && (joinOnly || len(fresh) < n.cfg.BootstrapExpect) && time.Since(logged) > 5*time.Second {
			if joinOnly {
				n.log.Info("waiting to join a cluster (-join without -bootstrap-expect never bootstraps)", "seen", len(fresh))
			} else {
				n.log.Info("waiting for nodes to form the cluster", "seen", len(fresh), "expect", n.cfg.BootstrapExpect)
			}
			logged = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: formation: %w: %w", link.ErrUnavailable, ctx.Err())
		case <-t.C:
		case <-n.gossip.events:
		}
	}
}
