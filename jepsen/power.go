package jepsen

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"

	"github.com/linkraft/linkraft/jepsen/lazyfs"
)

// The power-loss fault: every node's data dir is a lazyfs mount (package
// lazyfs) over a backing dir beside it, mounted by the harness before the
// nodes first start when the fault is in the run. The fault cuts the power
// to every node at once: SIGKILL to all of them, then every write not yet
// fsynced is dropped from their file systems (a kill alone keeps the page
// cache; a power cut does not). The heal restarts them. Every create
// acknowledged before the cut must survive it on every replica: the set,
// register, replicas and final checkers judge that.

// powerFaults is the power-loss group.
var powerFaults = []string{"power-loss"}

// mountLazy puts every node's data dir on lazyfs.
func (d *db) mountLazy() error {
	if err := lazyfs.Available(); err != nil {
		return err
	}
	for _, n := range d.nodes {
		l, err := lazyfs.Mount(filepath.Join(n.dir, "data.backing"), filepath.Join(n.dir, "data"))
		if err != nil {
			_ = d.unmountLazy()
			return err
		}
		d.lazy = append(d.lazy, l)
	}
	return nil
}

// unmountLazy undoes mountLazy (the nodes are stopped by then).
func (d *db) unmountLazy() error {
	var errs []error
	for _, l := range d.lazy {
		errs = append(errs, l.Unmount())
	}
	d.lazy = nil
	return errors.Join(errs...)
}

// powerLoss cuts every node's power: all are killed at once, then their
// unsynced writes are dropped. It is effective when every running node was
// killed and every file system was cut; what was dropped is the evidence
// (it may be nothing: a node that syncs what it acknowledges leaves little
// unsynced at any moment).
func (n *nemesis) powerLoss(_ context.Context) (*injection, error) {
	if len(n.db.lazy) != len(n.db.nodes) {
		return nil, errors.New("the data dirs are not on lazyfs")
	}
	type killed struct {
		effect string
		ok     bool
		err    error
	}
	res := make([]killed, len(n.db.nodes))
	var wg sync.WaitGroup
	for i, t := range n.db.nodes {
		wg.Go(func() {
			e, ok, err := n.db.kill(t)
			res[i] = killed{e, ok, err}
		})
	}
	wg.Wait()
	inj := &injection{detail: "power cut to " + n.names(n.indexes()) + ": SIGKILL, then unsynced writes dropped", effective: true}
	var effects []string
	var hit []*dbNode
	for i, r := range res {
		t := n.db.nodes[i]
		switch {
		case errors.Is(r.err, errNotRunning):
			// Down already: its disk loses power all the same.
			r.effect = t.id + " was not running"
		case r.err != nil:
			return nil, r.err
		default:
			inj.effective = inj.effective && r.ok
		}
		hit = append(hit, t)
		lost, err := n.db.dropUnsynced(i)
		if err != nil {
			return nil, err
		}
		effects = append(effects, r.effect+lost)
	}
	inj.effect = strings.Join(effects, "; ")
	inj.heal = func(context.Context) error {
		for _, t := range hit {
			_ = n.db.start(t) // a failed start is on record for the nodes checker
		}
		return nil
	}
	return inj, nil
}
