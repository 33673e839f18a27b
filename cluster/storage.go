package cluster

import (
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/status"
	"github.com/linkraft/linkraft/link"
)

// A full disk is a state, not a crash (etcd's NOSPACE alarm is the model).
// Every node measures its data dir and the free space of its file system
// each second. Over the quota or under the free-space floor, its storage
// alarm is on and it tells the others through gossip; while any replica of
// a group has its alarm on, that group's leader refuses the commands that
// grow the state (creates and updates) with link.ErrInsufficientStorage
// (HTTP 507). Deletes, visit-limited redirects, click batches (a bounded
// aggregate per code and hour: refusing them would break the click count's
// guarantee) and the meta group's own commands still go through, reads and
// redirects are served, and writes resume by themselves once space returns.
// If the disk fills anyway, apply retries the failed commit (fsm) until it
// can.

// Storage defaults.
const (
	// DefaultQuotaBytes bounds a node's data dir (etcd's largest
	// recommended --quota-backend-bytes).
	DefaultQuotaBytes = 8 << 30
	// DefaultMinFreeBytes is the free space below which writes stop.
	DefaultMinFreeBytes = 128 << 20
)

// storageAlarm measures the node's storage and keeps the last
// measurement.
type storageAlarm struct {
	cfg  Config
	log  *slog.Logger
	last atomic.Pointer[status.Storage]
}

// get returns the last measurement.
func (a *storageAlarm) get() status.Storage {
	if s := a.last.Load(); s != nil {
		return *s
	}
	return status.Storage{}
}

// measure walks the data dir and reads the file system's free space.
func (a *storageAlarm) measure() status.Storage {
	st := status.Storage{QuotaBytes: a.cfg.QuotaBytes, MinFree: a.cfg.MinFreeBytes, CheckedAt: time.Now()}
	_ = filepath.WalkDir(a.cfg.DataDir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			st.UsedBytes += info.Size()
		}
		return nil
	})
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(a.cfg.DataDir, &sfs); err == nil {
		st.FreeBytes = int64(sfs.Bavail) * int64(sfs.Bsize)
	} else {
		st.FreeBytes = -1
	}
	switch {
	case st.QuotaBytes > 0 && st.UsedBytes >= st.QuotaBytes:
		st.Alarm, st.Reason = true, fmt.Sprintf("data dir holds %d bytes, quota %d (-quota-bytes)", st.UsedBytes, st.QuotaBytes)
	case st.FreeBytes >= 0 && st.FreeBytes < st.MinFree:
		st.Alarm, st.Reason = true, fmt.Sprintf("%d bytes free on the data dir's file system, floor %d (-min-free-bytes)", st.FreeBytes, st.MinFree)
	}
	return st
}

// check measures, stores the result and, when the alarm changes, logs it
// and gossips it (g may be nil).
func (a *storageAlarm) check(g *gossip) {
	st := a.measure()
	prev := a.last.Swap(&st)
	if prev != nil && prev.Alarm == st.Alarm {
		return
	}
	if st.Alarm {
		a.log.Error("storage alarm: writes that grow the state are refused until space returns", "reason", st.Reason)
	} else if prev != nil {
		a.log.Info("storage alarm cleared; writes resume", "used_bytes", st.UsedBytes, "free_bytes", st.FreeBytes)
	}
	if g != nil {
		g.setFull(st.Alarm)
	}
}

// grows reports whether a command adds to the state (refused under a
// storage alarm).
func grows(cmd []byte) bool {
	if len(cmd) == 0 {
		return false
	}
	switch command.Type(cmd[0]) {
	case command.TypeCreateIfAbsent, command.TypeCreateBatch, command.TypeUpdate:
		return true
	}
	return false
}

// refusal returns link.ErrInsufficientStorage when this node, or a node
// the placement puts on group's shard, has its storage alarm on.
func (a *storageAlarm) refusal(n *Node, group command.GroupID, cmd []byte) error {
	s, ok := group.Shard()
	if !ok || !grows(cmd) {
		return nil
	}
	if st := a.last.Load(); st != nil && st.Alarm {
		return fmt.Errorf("%w: %s", link.ErrInsufficientStorage, st.Reason)
	}
	if n.gossip == nil {
		return nil
	}
	// Every create passes here: read the placement only when some node
	// has its alarm on.
	full := n.gossip.fullNodes()
	if len(full) == 0 {
		return nil
	}
	p, err := n.meta.Placement()
	if err != nil || p == nil || int(s) >= len(p.Shards) {
		return nil
	}
	for _, id := range p.Shards[s] {
		if full[id] {
			return fmt.Errorf("%w: replica %s of shard %d has its storage alarm on", link.ErrInsufficientStorage, id, s)
		}
	}
	return nil
}
