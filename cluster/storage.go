package cluster

import (
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/boltcheck"
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
//
// The alarm is for link data: the Raft logs, snapshots and state files.
// It counts what they really hold (a bbolt file's free pages are reused by
// later writes and do not count, so the alarm clears once compaction or
// deletes free space) and, between two measurements, the commands this
// node has let through since the last one (four times their size, for the
// log entry, the state write and their pages), so that a burst cannot run
// past the quota or the floor into ENOSPC before the next poll. Raw visits
// (visits.db) are not counted: they have their own budget
// (-visits-max-bytes) and are shed past it, so a redirect flood never
// stops link writes.

// Storage defaults.
const (
	// DefaultQuotaBytes bounds a node's data dir (etcd's largest
	// recommended --quota-backend-bytes).
	DefaultQuotaBytes = 8 << 30
	// DefaultMinFreeBytes is the free space below which writes stop.
	DefaultMinFreeBytes = 128 << 20
	// DefaultVisitMaxBytes bounds raw visits on a node without a quota
	// (with one, a quarter of it).
	DefaultVisitMaxBytes = 2 << 30
)

// visitFile is the raw visit file's name in the data dir.
const visitFile = "visits.db"

// storageAlarm measures the node's storage and keeps the last
// measurement.
type storageAlarm struct {
	cfg  Config
	log  *slog.Logger
	last atomic.Pointer[status.Storage]
	// written is the estimated bytes of the commands let through since
	// the last measurement.
	written atomic.Int64
	// freePages returns the free-page bytes of the bbolt files the node
	// holds open, by path (nil: none known).
	freePages func() map[string]int64
	// visits returns the raw visit file's live bytes, budget and shed
	// count (nil: no visit file).
	visits func() (used, budget int64, shed uint64)
}

// writeAmplification is how many bytes of disk a command's byte costs
// until the next measurement sees them: its log entry, its state write,
// and the pages around both.
const writeAmplification = 4

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
	a.written.Store(0) // the walk sees what was written before it
	var free map[string]int64
	if a.freePages != nil {
		free = a.freePages()
	}
	visits := filepath.Join(a.cfg.DataDir, visitFile)
	_ = filepath.WalkDir(a.cfg.DataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path == visits {
			return nil
		}
		if info, err := d.Info(); err == nil {
			size := info.Size()
			if strings.HasSuffix(path, ".db") {
				if hwm, err := boltcheck.HighWater(path); err == nil && hwm < size {
					size = hwm // bbolt grows its files ahead of use
				}
			}
			st.UsedBytes += max(size-free[path], 0)
		}
		return nil
	})
	if a.visits != nil {
		st.VisitBytes, st.VisitMaxBytes, st.VisitsShed = a.visits()
	}
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
	if st := a.last.Load(); st != nil {
		if st.Alarm {
			return fmt.Errorf("%w: %s", link.ErrInsufficientStorage, st.Reason)
		}
		// Checked at write time too: what was let through since the
		// last measurement counts.
		cost := int64(len(cmd)) * writeAmplification
		pending := a.written.Load() + cost
		switch {
		case st.QuotaBytes > 0 && st.UsedBytes+pending >= st.QuotaBytes:
			return fmt.Errorf("%w: data dir holds about %d bytes with the writes since %s, quota %d (-quota-bytes)",
				link.ErrInsufficientStorage, st.UsedBytes+pending, st.CheckedAt.Format(time.RFC3339Nano), st.QuotaBytes)
		case st.FreeBytes >= 0 && st.FreeBytes-pending < st.MinFree:
			return fmt.Errorf("%w: about %d bytes free with the writes since %s, floor %d (-min-free-bytes)",
				link.ErrInsufficientStorage, st.FreeBytes-pending, st.CheckedAt.Format(time.RFC3339Nano), st.MinFree)
		}
		a.written.Add(cost)
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
