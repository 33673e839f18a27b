package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/linkraft/linkraft/jepsen/checker"
)

// The operator's actions as faults, and faults aimed at the meta leader or
// composed of two: the things an operator does to a running cluster
// (drains, rolling restarts) must keep every guarantee too.
var (
	membershipFaults = []string{"membership", "replace-node"}
	restartFaults    = []string{"rolling-restart"}
	metaFaults       = []string{"partition-meta-leader", "kill-meta-leader"}
	composedFaults   = []string{"partition-then-kill-leader"}
	snapshotFaults   = []string{"snapshot-install"}
)

// installedLine is what hashicorp/raft logs on a follower that installed
// a snapshot its leader sent.
const installedLine = "Installed remote snapshot"

// snapshotInstall cuts one node off until its leaders have compacted
// their logs past it, so that after the heal it can only catch up from a
// snapshot (an InstallSnapshot of the leader's state file). It needs
// snapshots taken often and few trailing entries kept — the snapshot
// profile, -node-args "-raft-snapshot-threshold 32 -raft-trailing-logs 16
// -raft-snapshot-interval 100ms" — or it shows no effect. The evidence is
// read after the heal: the snapshots the node installed, counted in its
// log.
func (n *nemesis) snapshotInstall(ctx context.Context) (*injection, error) {
	cut, _, err := n.snapshotCut(ctx)
	return cut, err
}

// snapshotCut cuts a random node t off until its leaders compact past it;
// the injection's after reads the snapshots t installed after the heal.
func (n *nemesis) snapshotCut(ctx context.Context) (*injection, *dbNode, error) {
	ix := n.shuffled()
	t := n.db.nodes[ix[0]]
	before := strings.Count(t.logs(), installedLine)
	cut, err := n.cut(ctx, ix[:1], ix[1:])
	if err != nil {
		return nil, nil, err
	}
	cut.detail = "cut off " + t.id + " until its leaders compact past it: " + cut.detail
	cut.measure = nil
	cut.after = func(ctx context.Context) (string, bool, error) {
		deadline := time.Now().Add(20 * time.Second)
		for {
			if k := strings.Count(t.logs(), installedLine) - before; k > 0 {
				return fmt.Sprintf("%s installed %d snapshot(s) after the heal", t.id, k), true, nil
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return t.id + " installed no snapshot within 20 s of the heal (the logs it missed were still there)", false, nil
			}
			time.Sleep(250 * time.Millisecond) // polling the node's log file
		}
	}
	return cut, t, nil
}

// metaLeader is the node that says it leads the meta group (errNoTarget if
// none does).
func (n *nemesis) metaLeader(ctx context.Context) (int, error) {
	for i, node := range n.db.nodes {
		st, err := n.cl.status(ctx, node.Admin())
		if err == nil && st.Meta.State == "Leader" {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w: no node reports leading the meta group", errNoTarget)
}

// drainState is a node's GET /admin/v1/nodes/{id}/drain.
type drainState struct {
	Draining bool `json:"draining"`
	Replicas int  `json:"replicas"`
}

// drainCall sends method to node id's drain route through the admin
// listener of node via.
func (n *nemesis) drainCall(ctx context.Context, via *dbNode, method, id string) (drainState, error) {
	var st drainState
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, b, err := n.cl.do(ctx, method, via.Admin()+"/admin/v1/nodes/"+id+"/drain", nil)
	if err != nil {
		return st, err
	}
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("drain %s %s: %d %s", method, id, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return st, json.Unmarshal(b, &st)
}

// membership drains a random node while clients run: the meta leader
// moves its replicas to the others one at a time. The heal calls the
// drain off, and the balancer moves replicas back. Effective if the node
// hosted fewer replicas by the heal than at the start.
func (n *nemesis) membership(ctx context.Context) (*injection, error) {
	ix := n.shuffled()
	target, via := n.db.nodes[ix[0]], n.db.nodes[ix[len(ix)-1]]
	before, err := n.drainCall(ctx, via, http.MethodPost, target.nodeID())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoTarget, err)
	}
	return &injection{
		detail: fmt.Sprintf("drain %s (%d replicas) through %s", target.nodeID(), before.Replicas, via.id),
		measure: func(ctx context.Context) (string, bool, error) {
			now, err := n.drainCall(ctx, via, http.MethodGet, target.nodeID())
			if err != nil {
				return "", false, err
			}
			return fmt.Sprintf("%s hosts %d of its %d replicas", target.id, now.Replicas, before.Replicas), now.Replicas < before.Replicas, nil
		},
		heal: func(ctx context.Context) error {
			return adminRetry(10, func() error {
				_, err := n.drainCall(ctx, via, http.MethodDelete, target.nodeID())
				return err
			})
		},
	}, nil
}

// rollingRestart stops every node gracefully (SIGTERM) and starts it
// again, one at a time, each back to ready before the next: an operator's
// upgrade. Effective if every node exited cleanly and came back.
func (n *nemesis) rollingRestart(ctx context.Context) (*injection, error) {
	inj := &injection{detail: "SIGTERM and start, one at a time: " + n.names(n.indexes()), effective: true, heal: func(context.Context) error { return nil }}
	var effects []string
	for _, i := range n.indexes() {
		t := n.db.nodes[i]
		effect, ok, err := n.db.restart(ctx, t, n.cl)
		if errors.Is(err, errNotRunning) {
			effects = append(effects, t.id+" was not running")
			inj.effective = false
			continue
		}
		if err != nil {
			return nil, err
		}
		effects = append(effects, effect)
		inj.effective = inj.effective && ok
	}
	inj.effect = strings.Join(effects, "; ")
	return inj, nil
}

// restartGrace bounds a graceful stop and the start after it.
const restartGrace = 30 * time.Second

// restart stops node t with SIGTERM (expecting a clean exit), starts it
// again and waits until it is ready.
func (d *db) restart(ctx context.Context, t *dbNode, cl *client) (string, bool, error) {
	if effect, ok, err := d.stopCleanly(t); err != nil || !ok {
		return effect, ok, err
	}
	effect, ok, err := d.startReady(ctx, t, cl)
	if ok {
		effect = t.id + " stopped cleanly and is ready again"
	}
	return effect, ok, err
}

// stopCleanly stops node t with SIGTERM and waits for it to exit; ok if
// it exited cleanly within restartGrace.
func (d *db) stopCleanly(t *dbNode) (string, bool, error) {
	_, done, err := t.signal(syscall.SIGTERM, checker.CauseRestart, stopped)
	if err != nil {
		return "", false, err
	}
	t.mu.Lock()
	t.runs[len(t.runs)-1].Stopping = d.rec.Now()
	t.mu.Unlock()
	select {
	case <-done:
	case <-time.After(restartGrace):
		return fmt.Sprintf("%s did not exit within %s of SIGTERM", t.id, restartGrace), false, nil
	}
	t.mu.Lock()
	r := t.runs[len(t.runs)-1]
	t.mu.Unlock()
	if r.Signal != "" || r.ExitCode != 0 {
		return fmt.Sprintf("%s ended with %s after SIGTERM", t.id, r.How()), false, nil
	}
	return t.id + " stopped cleanly", true, nil
}

// startReady starts node t and waits until it is ready.
func (d *db) startReady(ctx context.Context, t *dbNode, cl *client) (string, bool, error) {
	if err := d.start(t); err != nil {
		return err.Error(), false, nil
	}
	rctx, cancel := context.WithTimeout(ctx, restartGrace)
	defer cancel()
	for !d.ready(rctx, cl.http, t) {
		select {
		case <-rctx.Done():
			return fmt.Sprintf("%s restarted but not ready within %s", t.id, restartGrace), false, nil
		case <-time.After(250 * time.Millisecond):
		}
	}
	return t.id + " is ready", true, nil
}

// replaceNode replaces a node for good, as an operator replaces a lost
// machine (README's runbook: remove it, start the new one): the node is
// stopped (SIGTERM), removed from the cluster through another node, its
// data dir emptied, and a node with a new ID and an empty disk started in
// its place (the same namespace and address), which joins and takes
// replicas. The heal does nothing: the new node stays. Effective if the
// new node hosts a replica after the heal and the old ID is gone from the
// placement (its replicas were made again on the others and the new one).
func (n *nemesis) replaceNode(ctx context.Context) (*injection, error) {
	ix := n.shuffled()
	t, via := n.db.nodes[ix[0]], n.db.nodes[ix[len(ix)-1]]
	old := t.nodeID()
	effect, ok, err := n.db.stopCleanly(t)
	if err != nil {
		return nil, err
	}
	noHeal := func(context.Context) error { return nil }
	if !ok {
		// Whatever happened, the run goes on with the node running.
		_, _, _ = n.db.startReady(ctx, t, n.cl)
		return &injection{detail: "replace " + old, effect: effect, heal: noHeal}, nil
	}
	if err := n.removeNode(ctx, via, old); err != nil {
		// Not removed: it comes back as it was (its data kept).
		_, _, _ = n.db.startReady(ctx, t, n.cl)
		return &injection{detail: "replace " + old, effect: fmt.Sprintf("%s not removed: %v", old, err), heal: noHeal}, nil
	}
	if err := n.db.wipe(t); err != nil {
		return nil, err
	}
	t.gen.Add(1)
	neu := t.nodeID()
	started, ok, err := n.db.startReady(ctx, t, n.cl)
	if err != nil {
		return nil, err
	}
	inj := &injection{
		detail:    fmt.Sprintf("replace %s by %s (an empty disk, at %s's address) through %s", old, neu, t.id, via.id),
		effect:    fmt.Sprintf("%s removed; %s", old, started),
		effective: ok,
		heal:      noHeal,
	}
	if !ok {
		return inj, nil
	}
	inj.after = func(ctx context.Context) (string, bool, error) {
		deadline := time.Now().Add(60 * time.Second)
		for {
			st, err := n.drainCall(ctx, via, http.MethodGet, neu)
			if err == nil && st.Replicas > 0 {
				return fmt.Sprintf("%s removed; %s hosts %d replicas", old, neu, st.Replicas), true, nil
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Sprintf("%s removed; %s hosts no replica 60 s after the heal (%v)", old, neu, err), false, nil
			}
			time.Sleep(500 * time.Millisecond) // polling the placement through the admin API
		}
	}
	return inj, nil
}

// removeNode removes node id for good through the admin listener of via
// (DELETE /admin/v1/nodes/{id}, linknode remove), tried again while the
// meta leader moves.
func (n *nemesis) removeNode(ctx context.Context, via *dbNode, id string) error {
	return adminRetry(20, func() error {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resp, b, err := n.cl.do(cctx, http.MethodDelete, via.Admin()+"/admin/v1/nodes/"+id, nil)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
			return fmt.Errorf("remove %s: %d %s", id, resp.StatusCode, strings.TrimSpace(string(b)))
		}
		return nil
	})
}

// adminRetry calls an operator's admin call up to tries times, half a
// second apart, while it fails (the meta leader may be moving); the last
// error if it never succeeds.
func adminRetry(tries int, call func() error) error {
	var err error
	for try := 0; try < tries; try++ {
		if err = call(); err == nil {
			return nil
		}
		time.Sleep(500 * time.Millisecond) // pacing the retries of an admin call, not a synchronisation
	}
	return err
}

// partitionThenKillLeader is two faults composed: the node leading the
// most shards is cut off from the others, and then killed while cut off.
// The heal starts it and heals the network.
func (n *nemesis) partitionThenKillLeader(ctx context.Context) (*injection, error) {
	l, err := n.leader(ctx)
	if err != nil {
		return nil, err
	}
	cut, err := n.cut(ctx, []int{l}, n.others(l))
	if err != nil {
		return nil, err
	}
	killed, err := n.kill(ctx, []int{l})
	if err != nil || killed == nil {
		_ = cut.heal(ctx)
		if err == nil {
			err = errNotRunning
		}
		return nil, err
	}
	return &injection{
		// The counter checker reads kills from details that start so.
		detail:    "SIGKILL " + n.db.nodes[l].id + " (the leader, cut off first: " + cut.detail + ")",
		effect:    killed.effect,
		effective: killed.effective,
		measure: func(ctx context.Context) (string, bool, error) {
			effect, ok, err := cut.measure(ctx)
			return killed.effect + "; " + effect, ok && killed.effective, err
		},
		heal: func(ctx context.Context) error {
			return errors.Join(killed.heal(ctx), cut.heal(ctx))
		},
	}, nil
}

// logs returns the node's log file (every run of it) as text; "" if it
// cannot be read.
func (n *dbNode) logs() string {
	b, err := os.ReadFile(n.logPath)
	if err != nil {
		return ""
	}
	return string(b)
}
