package jepsen

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// The disk-full fault: one node (the last) keeps its data dir on a tmpfs of
// its own (smallDiskSize), mounted by the harness before the node first
// starts. The fault fills that file system to the last byte and frees it at
// the heal. The node's storage alarm must go on (shown by its own
// /admin/v1/cluster: the evidence), writes to its shards are refused with
// 507 meanwhile, a commit that meets ENOSPC is retried, and no node exits
// or loses anything: every other checker judges that.

// smallDiskSize is the tmpfs of the disk-full node (RAM, used only as far
// as it is written).
const smallDiskSize = "1g"

// diskNode is the node whose data dir is the small disk.
func (d *db) diskNode() *dbNode { return d.nodes[len(d.nodes)-1] }

// mountSmallDisk mounts the disk-full node's data dir on a tmpfs.
func (d *db) mountSmallDisk(ctx context.Context) error {
	dir := filepath.Join(d.diskNode().dir, "data")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "mount", "-t", "tmpfs", "-o", "size="+smallDiskSize+",mode=0750", "tmpfs", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("mount the disk-full node's tmpfs: %v: %s", err, out)
	}
	d.smallDisk = dir
	return nil
}

// unmountSmallDisk undoes mountSmallDisk (the node is stopped by then).
func (d *db) unmountSmallDisk(ctx context.Context) error {
	if d.smallDisk == "" {
		return nil
	}
	if out, err := exec.CommandContext(ctx, "umount", "-l", d.smallDisk).CombinedOutput(); err != nil {
		return fmt.Errorf("unmount %s: %v: %s", d.smallDisk, err, out)
	}
	return nil
}

// fillDisk fills the disk-full node's file system and waits (up to 5 s)
// for the node to report its storage alarm.
func (n *nemesis) fillDisk(ctx context.Context) (*injection, error) {
	if n.db.smallDisk == "" {
		return nil, errors.New("no small disk mounted")
	}
	target := n.db.diskNode()
	filler := filepath.Join(n.db.smallDisk, "jepsen-filler")
	f, err := os.OpenFile(filler, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 1<<20)
	var written int64
	for {
		k, err := f.Write(buf)
		written += int64(k)
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil {
			f.Close()
			return nil, err
		}
	}
	f.Close()
	inj := &injection{
		detail: fmt.Sprintf("filled %s's file system (%d MB written)", target.id, written>>20),
		heal: func(context.Context) error {
			if err := os.Remove(filler); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			return nil
		},
	}
	inj.measure = func(ctx context.Context) (string, bool, error) {
		deadline := time.Now().Add(5 * time.Second)
		for {
			st, err := n.cl.status(ctx, target.Admin())
			if err == nil && st.Storage.Alarm {
				return fmt.Sprintf("%s raised its storage alarm: %s", target.id, st.Storage.Reason), true, nil
			}
			if time.Now().After(deadline) {
				if err != nil {
					return fmt.Sprintf("%s did not answer: %v", target.id, err), false, nil
				}
				return target.id + " reported no storage alarm", false, nil
			}
			select {
			case <-ctx.Done():
				return "", false, ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return inj, nil
}
