package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/backup"
	"github.com/linkraft/linkraft/link"
)

// restoreBudget bounds the records of one RestoreLinks entry, in bytes.
const restoreBudget = 256 << 10

// restoreLeaseNode is the holder of the IDs a restored backup's cluster had
// handed out (GET /admin/v1/leases shows them under this name).
const restoreLeaseNode = "restore"

// maxReportedConflicts bounds the codes a restore report names.
const maxReportedConflicts = 100

// Restore puts a backup (package backup's format, read from r) into this
// cluster through Raft, so that every replica, present and future, holds
// it: the IDs the backup's cluster handed out are leased (no code is
// generated twice), its keys and blocked domains are added, and every
// record — live links, tombstones, clicks — goes to the shard this
// cluster's ring names for its code. The file is spooled to the data dir
// and checked whole first: a damaged, truncated or foreign file is refused
// (wrapping backup.ErrDamaged, ...) before anything is written. A cluster
// that holds links is refused (backup.ErrNotEmpty) unless resume is set:
// a restore run again after it was cut short skips what it put before.
func (a *Admin) Restore(ctx context.Context, r io.Reader, resume bool) (*backup.Report, error) {
	n := a.n
	if err := n.supports(levelBackup); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(n.cfg.DataDir, "restore-*.tmp")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := io.Copy(f, r); err != nil {
		return nil, fmt.Errorf("%w: reading the backup: %w", link.ErrInvalidInput, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	// The first read checks the file whole — its frames, and every entry
	// as its command would be checked — so that a bad file writes nothing.
	h, man, err := backup.Read(f, backup.Visitor{Meta: checkMeta, Records: func(_ uint32, recs []backup.Record) error {
		for _, r := range recs {
			rl, err := toRestored(r)
			if err == nil {
				_, err = rl.Link()
			}
			if err != nil {
				return fmt.Errorf("%w: %w", backup.ErrDamaged, err)
			}
		}
		return nil
	}})
	if err != nil {
		return nil, err
	}
	if man.NextID > maxRestoreID {
		return nil, fmt.Errorf("%w: its next free ID %d is beyond any real cluster's (%d)", backup.ErrDamaged, man.NextID, uint64(maxRestoreID))
	}
	if !resume {
		if err := a.checkEmpty(ctx); err != nil {
			return nil, err
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	rs := &restorer{a: a, fresh: !resume, rep: &backup.Report{Source: *h, Manifest: *man}, batches: map[command.ShardID]*pendingRestore{}}
	_, _, err = backup.Read(f, backup.Visitor{Meta: func(m *backup.Meta) error { return rs.meta(ctx, m) }, Records: func(_ uint32, recs []backup.Record) error {
		return rs.records(ctx, recs)
	}})
	if err == nil {
		err = rs.flushAll(ctx)
	}
	return rs.rep, err
}

// checkEmpty returns backup.ErrNotEmpty if a shard holds a record.
func (a *Admin) checkEmpty(ctx context.Context) error {
	for s := range command.ShardID(a.n.host.ring.Shards()) {
		stepCtx, cancel := context.WithTimeout(ctx, transferStep)
		part, err := a.n.links.dumpShard(stepCtx, s, "", 0)
		cancel()
		if err != nil {
			return fmt.Errorf("shard %d: %w", s, err)
		}
		if len(part.Links) > 0 {
			return fmt.Errorf("%w: shard %d holds %q and more (restore into a new cluster, or resume a restore that was cut short)", backup.ErrNotEmpty, s, part.Links[0].Code)
		}
	}
	return nil
}

// restorer applies a checked backup.
type restorer struct {
	a *Admin
	// fresh says the cluster held no link when this restore began, so a
	// record found present was put by this restore: by an entry proposed
	// again because its first answer was lost.
	fresh   bool
	rep     *backup.Report
	batches map[command.ShardID]*pendingRestore
}

// pendingRestore is a shard's next RestoreLinks entry.
type pendingRestore struct {
	entry command.RestoreLinks
	size  int
}

// meta leases the IDs the backup's cluster handed out and adds its keys
// and blocked domains.
func (rs *restorer) meta(ctx context.Context, m *backup.Meta) error {
	n := rs.a.n
	next, err := n.meta.NextID()
	if err != nil {
		return err
	}
	// The manifest's next free ID was read after every shard: IDs the
	// records hold may lie past the meta part's.
	want := max(m.NextID, rs.rep.Manifest.NextID)
	for next < want {
		lease := command.LeaseRange{Node: restoreLeaseNode, N: min(want-next, command.MaxLease)}
		stepCtx, cancel := context.WithTimeout(ctx, transferStep)
		res, err := n.router.retryUnknown(stepCtx, command.MetaGroup, lease.Encode())
		cancel()
		if err != nil {
			return fmt.Errorf("leasing the backup's IDs: %w", err)
		}
		next = res.LeaseEnd
	}
	rs.rep.NextID = max(next, want)
	for _, cmd := range m.Keys {
		if err := rs.metaEntry(ctx, cmd, command.TypeCreateKey, &rs.rep.Keys); err != nil {
			return fmt.Errorf("key: %w", err)
		}
	}
	for _, cmd := range m.Blocked {
		if err := rs.metaEntry(ctx, cmd, command.TypeSetBlocked, &rs.rep.Blocked); err != nil {
			return fmt.Errorf("blocked domain: %w", err)
		}
	}
	return nil
}

// metaEntry proposes one meta command of the backup, of type typ, and
// counts it in added unless it was there already (command.ErrKeyExists).
func (rs *restorer) metaEntry(ctx context.Context, cmd []byte, typ command.Type, added *int) error {
	stepCtx, cancel := context.WithTimeout(ctx, transferStep)
	_, err := rs.a.n.router.retryUnknown(stepCtx, command.MetaGroup, cmd)
	cancel()
	switch {
	case errors.Is(err, command.ErrKeyExists):
		return nil
	case err != nil:
		return err
	}
	*added++
	return nil
}

// checkMeta checks the backup's meta part as its commands would be
// checked: keys that are not the first key, blocked domains.
func checkMeta(m *backup.Meta) error {
	if m.NextID > maxRestoreID {
		return fmt.Errorf("%w: its next free ID %d is beyond any real cluster's (%d)", backup.ErrDamaged, m.NextID, uint64(maxRestoreID))
	}
	for _, part := range []struct {
		cmds [][]byte
		typ  command.Type
	}{{m.Keys, command.TypeCreateKey}, {m.Blocked, command.TypeSetBlocked}} {
		for _, cmd := range part.cmds {
			if len(cmd) == 0 || command.Type(cmd[0]) != part.typ || command.IsFirstKey(cmd) {
				return fmt.Errorf("%w: the backup's meta part holds an entry of another kind", backup.ErrDamaged)
			}
			if err := command.Check(command.MetaGroup.Kind(), cmd); err != nil {
				return fmt.Errorf("%w: %w", backup.ErrDamaged, err)
			}
		}
	}
	return nil
}

// maxRestoreID bounds the next free ID a backup may carry: 2^40 IDs (a
// trillion links) take 65,536 lease entries to carry over, and a file
// claiming more is made, not taken (the restore would lease for hours).
const maxRestoreID = 1 << 40

// toRestored is r as a RestoreLinks entry's link (its record unchecked:
// the first read of the file checked it).
func toRestored(r backup.Record) (command.RestoredLink, error) {
	rl := command.RestoredLink{Code: r.Code, Record: r.Link}
	if len(r.Clicks) > 0 {
		if err := rl.Clicks.Unmarshal(r.Clicks); err != nil {
			return rl, fmt.Errorf("clicks of %q: %w", r.Code, err)
		}
	}
	return rl, nil
}

// records queues records for their shards, proposing each shard's entry
// when it is full.
func (rs *restorer) records(ctx context.Context, recs []backup.Record) error {
	for _, r := range recs {
		rl, err := toRestored(r)
		if err != nil {
			return fmt.Errorf("%w: %w", backup.ErrDamaged, err)
		}
		s := rs.a.n.host.locate(r.Code)
		p := rs.batches[s]
		if p == nil {
			p = &pendingRestore{}
			rs.batches[s] = p
		}
		p.entry.Links = append(p.entry.Links, rl)
		if p.size += rl.Size(); p.size >= restoreBudget || len(p.entry.Links) >= command.MaxRestoreBatch {
			if err := rs.flush(ctx, s); err != nil {
				return err
			}
		}
	}
	return nil
}

// flushAll proposes every shard's pending entry.
func (rs *restorer) flushAll(ctx context.Context) error {
	for s := range rs.batches {
		if err := rs.flush(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// flush proposes shard s's pending entry and counts its result. An entry
// whose outcome is unknown is proposed again: what it put is then present.
func (rs *restorer) flush(ctx context.Context, s command.ShardID) error {
	p := rs.batches[s]
	if p == nil || len(p.entry.Links) == 0 {
		return nil
	}
	stepCtx, cancel := context.WithTimeout(ctx, transferStep)
	res, err := rs.a.n.router.retryUnknown(stepCtx, s.Group(), p.entry.Encode())
	cancel()
	if err != nil {
		return fmt.Errorf("shard %d: %w", s, err)
	}
	if res.Restore == nil {
		return fmt.Errorf("shard %d: a restore without its result", s)
	}
	rep := rs.rep
	rep.Links += res.Restore.Restored
	if rs.fresh {
		rep.Links += res.Restore.Present
	} else {
		rep.Present += res.Restore.Present
	}
	rep.ConflictCount += len(res.Restore.Conflicts)
	for _, c := range res.Restore.Conflicts {
		if len(rep.Conflicts) < maxReportedConflicts {
			rep.Conflicts = append(rep.Conflicts, c)
		}
	}
	p.entry.Links, p.size = nil, 0
	return nil
}
