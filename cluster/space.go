package cluster

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
	"time"

	"github.com/linkraft/linkraft/command"
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
// redirects are served, and writes resume by themselves once space returns. If the
// disk fills anyway, apply retries the failed commit (fsm) until it can.

// Storage defaults.
const (
	// DefaultQuotaBytes bounds a node's data dir (etcd's largest
	// recommended --quota-backend-bytes).
	DefaultQuotaBytes = 8 << 30
	// DefaultMinFreeBytes is the free space below which writes stop.
	DefaultMinFreeBytes = 128 << 20
)

// Storage is a node's last storage measurement.
type Storage struct {
	UsedBytes  int64     `json:"used_bytes"`
	FreeBytes  int64     `json:"free_bytes"`
	QuotaBytes int64     `json:"quota_bytes"`
	MinFree    int64     `json:"min_free_bytes"`
	Alarm      bool      `json:"alarm"`
	Reason     string    `json:"reason,omitempty"`
	CheckedAt  time.Time `json:"checked_at"`
}

// Storage returns the last measurement of this node's storage.
func (n *Node) Storage() Storage {
	if s := n.storage.Load(); s != nil {
		return *s
	}
	return Storage{}
}

// measureStorage walks the data dir and reads the file system's free space.
func (n *Node) measureStorage() Storage {
	st := Storage{QuotaBytes: n.cfg.QuotaBytes, MinFree: n.cfg.MinFreeBytes, CheckedAt: time.Now()}
	_ = filepath.WalkDir(n.cfg.DataDir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			st.UsedBytes += info.Size()
		}
		return nil
	})
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(n.cfg.DataDir, &sfs); err == nil {
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

// checkStorage measures, stores the result and, when the alarm changes,
// logs it and gossips it.
func (n *Node) checkStorage() {
	st := n.measureStorage()
	prev := n.storage.Swap(&st)
	if prev != nil && prev.Alarm == st.Alarm {
		return
	}
	if st.Alarm {
		n.log.Error("storage alarm: writes that grow the state are refused until space returns", "reason", st.Reason)
	} else if prev != nil {
		n.log.Info("storage alarm cleared; writes resume", "used_bytes", st.UsedBytes, "free_bytes", st.FreeBytes)
	}
	if n.gossip != nil {
		n.gossip.setFull(st.Alarm)
	}
}

// storageLoop measures every interval until the node closes.
func (n *Node) storageLoop() {
	defer n.bg.Done()
	n.every(n.cfg.StorageInterval, n.checkStorage)
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

// storageRefusal returns link.ErrInsufficientStorage when this node, or a
// node the placement puts on shard group, has its storage alarm on.
func (n *Node) storageRefusal(group command.GroupID, cmd []byte) error {
	s, ok := group.Shard()
	if !ok || !grows(cmd) {
		return nil
	}
	if st := n.storage.Load(); st != nil && st.Alarm {
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
	p, err := n.metaFSM.Placement()
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
