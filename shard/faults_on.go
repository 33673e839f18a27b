//go:build jepsenbugs

package shard

import (
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/internal/bugs"
)

// faultNoInvalidate (no-invalidate): apply leaves a cached link alone.
func faultNoInvalidate() bool { return bugs.On(bugs.NoInvalidate) }

// UndoLastWrites undoes the last n link writes of the closed shard state
// in dir (fsm.UndoLastWrites), for the lose-last-apply-on-restart fault.
func UndoLastWrites(dir string, n int) ([]string, error) {
	return fsm.UndoLastWrites(StatePath(dir), n)
}
