package jepsen

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/linkraft/linkraft/internal/crashpoint"
	"github.com/linkraft/linkraft/jepsen/checker"
)

// The crash faults: a node crashes at a named place in its write path
// (internal/crashpoint), not wherever a kill from outside happens to land.
// A run with one of them builds linknode with -tags jepsencrash and gives
// every node an arming file ($LINKRAFT_CRASH_ARM, crash-arm in its folder):
// the harness writes a point's name there and sends SIGUSR2; the node
// SIGKILLs itself when it next reaches that point. With the data dirs on
// lazyfs (power-loss in the run), the crashed node's unsynced writes are
// dropped too: a power cut to that node at that point.
//   - crash-point: a random node, at the next point in turn of log-stored,
//     state-pending, state-committed and snapshot-persist (the last needs
//     snapshots to be taken: the snapshot profile); restarted at the heal.
//   - crash-install: snapshot-install's cut, and at its heal the cut-off
//     node is armed at restore-swap: it crashes halfway through installing
//     the snapshot its leader sends, and is restarted to finish.
var crashFaults = []string{"crash-point", "crash-install"}

// crashCycle is the order crash-point goes through its points.
var crashCycle = []string{crashpoint.LogStored, crashpoint.StatePending, crashpoint.StateCommitted, crashpoint.SnapshotPersist}

// crashWait bounds how long an armed point may take to be reached.
const crashWait = 10 * time.Second

// crashArm is node n's arming file.
func (n *dbNode) crashArm() string { return filepath.Join(n.dir, "crash-arm") }

// crashAt arms point on node t and waits (up to wait) for t to crash
// there (see awaitCrash).
func (d *db) crashAt(t *dbNode, point string, wait time.Duration) (string, bool, error) {
	done, err := t.armCrash(point)
	if err != nil {
		return "", false, err
	}
	return d.awaitCrash(t, point, done, wait)
}

// armCrash arms point on node t; the channel is closed when t's process
// has ended. Nothing expects the end yet: awaitCrash puts it down to the
// nemesis only if t ended at the point, so that a node that fails another
// way while armed is still an unexpected exit.
func (t *dbNode) armCrash(point string) (chan struct{}, error) {
	if err := os.WriteFile(t.crashArm(), []byte(point), 0o644); err != nil {
		return nil, err
	}
	_, done, err := t.signal(syscall.SIGUSR2, "", running)
	return done, err
}

// dropUnsynced drops node i's unsynced writes if its data dir is on
// lazyfs, and says what went.
func (d *db) dropUnsynced(i int) (string, error) {
	if len(d.lazy) != len(d.nodes) {
		return "", nil
	}
	lost, err := d.lazy[i].PowerLoss()
	if err != nil {
		return "", fmt.Errorf("power loss of %s: %w", d.nodes[i].id, err)
	}
	return fmt.Sprintf("; %d KiB unsynced in %d files dropped", (lost.Bytes+1023)/1024, lost.Files), nil
}

// crashPoint crashes a random running node at the next point of the
// cycle; the heal starts it again.
func (n *nemesis) crashPoint(_ context.Context) (*injection, error) {
	point := crashCycle[n.crashNext%len(crashCycle)]
	n.crashNext++
	for _, i := range n.shuffled() {
		t := n.db.nodes[i]
		if t.pid() == 0 {
			continue
		}
		effect, ok, err := n.db.crashAt(t, point, crashWait)
		if err != nil {
			return nil, err
		}
		inj := &injection{detail: fmt.Sprintf("%s armed at crash point %s", t.id, point), effect: effect, effective: ok,
			heal: func(context.Context) error { return nil }}
		if !ok {
			return inj, nil // disarmed, and running on
		}
		// The counter checker reads kills from details that start so.
		inj.detail = fmt.Sprintf("SIGKILL %s (at crash point %s)", t.id, point)
		lost, err := n.db.dropUnsynced(i)
		if err != nil {
			return nil, err
		}
		inj.effect += lost
		inj.heal = func(context.Context) error {
			_ = n.db.start(t) // a failed start is on record for the nodes checker
			return nil
		}
		return inj, nil
	}
	return nil, fmt.Errorf("%w: no node is running", errNoTarget)
}

// crashInstall is snapshot-install with the cut-off node armed at
// restore-swap when the cut heals: it crashes in the middle of the
// install, is started again, and must finish it (the replicas checker
// compares its state with the others').
func (n *nemesis) crashInstall(ctx context.Context) (*injection, error) {
	inj, t, err := n.snapshotCut(ctx)
	if err != nil {
		return nil, err
	}
	inj.detail = "crash-install: " + inj.detail + "; armed at " + crashpoint.RestoreSwap + " at the heal"
	heal := inj.heal
	var done chan struct{}
	inj.heal = func(ctx context.Context) error {
		var err error
		if done, err = t.armCrash(crashpoint.RestoreSwap); errors.Is(err, errNotRunning) {
			err = nil
		}
		return errors.Join(err, heal(ctx)) // the cut heals whatever the arming did
	}
	inj.after = func(ctx context.Context) (string, bool, error) {
		if done == nil {
			return t.id + " was not running at the heal", false, nil
		}
		effect, ok, err := n.db.awaitCrash(t, crashpoint.RestoreSwap, done, 20*time.Second)
		if err != nil || !ok {
			return effect, false, err
		}
		lost, err := n.db.dropUnsynced(t.index)
		if err != nil {
			return "", false, err
		}
		ready, ok, err := n.db.startReady(ctx, t, n.cl)
		return effect + lost + "; " + ready, ok, err
	}
	return inj, nil
}

// awaitCrash waits (up to wait) for t, armed at point with its done
// channel, to crash there, and records that crash as the nemesis's; if t
// does not reach the point in time, it is disarmed.
func (d *db) awaitCrash(t *dbNode, point string, done <-chan struct{}, wait time.Duration) (string, bool, error) {
	select {
	case <-done:
	case <-time.After(wait):
		if err := os.WriteFile(t.crashArm(), nil, 0o644); err != nil {
			return "", false, err
		}
		_, _, _ = t.signal(syscall.SIGUSR2, "", running)
		select {
		case <-done: // reached just before the disarm
		case <-time.After(time.Second):
			return fmt.Sprintf("%s did not reach %s within %s", t.id, point, wait), false, nil
		}
	}
	log := t.logs()
	log = log[max(strings.LastIndex(log, "=== jepsen: start"), 0):] // this run's lines
	reached := strings.Contains(log, "crash point "+point+" reached")
	t.mu.Lock()
	defer t.mu.Unlock()
	r := &t.runs[len(t.runs)-1]
	if r.Signal != "killed" || !reached {
		return fmt.Sprintf("%s ended with %s, not at %s", t.id, r.How(), point), false, nil
	}
	r.Cause, r.LastLog, t.state = checker.CauseNemesis, nil, killed
	return fmt.Sprintf("%s crashed at %s", t.id, point), true, nil
}

// nemesisKills are the times the nemesis's SIGKILLs ended node runs
// (kills, power cuts, crash points), by node name.
func nemesisKills(runs []checker.NodeRun) map[string][]int64 {
	kills := map[string][]int64{}
	for _, r := range runs {
		if r.Exited && r.Signal == "killed" && r.Cause == checker.CauseNemesis {
			kills[r.Node] = append(kills[r.Node], r.Ended)
		}
	}
	return kills
}
