package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"runtime/debug"
	"slices"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/backup"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/peer"
	"github.com/linkraft/linkraft/shard"
)

// dumpBudget bounds one part of a shard read for a backup: its answer
// stays well inside a peer frame.
const dumpBudget = 256 << 10

// transferStep bounds each step of a backup or a restore (a read point, a
// part of a shard, an entry): a group without a leader fails the whole
// with its name instead of holding it.
const transferStep = 30 * time.Second

// Backup writes a backup of the whole cluster to w (package backup's
// format): the meta group's settings, next free ID, keys and blocklist,
// read after a linearizable read point of the meta group, then every
// shard's records, tombstones and clicks, read on its leader part by
// part. Every write acknowledged before Backup was called is in it. A
// failure midway leaves w without a manifest, which a restore refuses.
func (a *Admin) Backup(ctx context.Context, w io.Writer) (*backup.Manifest, error) {
	n := a.n
	if err := n.supports(levelBackup); err != nil {
		return nil, err
	}
	if err := n.metaReadPointStep(ctx); err != nil {
		return nil, fmt.Errorf("meta group: %w", err)
	}
	settings, err := n.meta.Settings()
	if err != nil {
		return nil, err
	}
	if settings == nil {
		return nil, fmt.Errorf("%w: the cluster is not formed", link.ErrUnavailable)
	}
	m, err := a.metaPart()
	if err != nil {
		return nil, err
	}
	bw, err := backup.NewWriter(w, backup.Header{ClusterID: settings.ClusterID, CreatedAt: time.Now().UTC(), Node: n.cfg.NodeID,
		Version: buildVersion(), Settings: (&command.SetSettings{Settings: *settings}).Encode()})
	if err != nil {
		return nil, err
	}
	if err := bw.Meta(*m); err != nil {
		return nil, err
	}
	for s := range command.ShardID(settings.Shards) {
		if err := a.backupShard(ctx, bw, s); err != nil {
			return nil, fmt.Errorf("shard %d: %w", s, err)
		}
	}
	// A link written while the shards were read may hold an ID leased
	// after the meta part was: the next free ID read again, after a read
	// point, is past every ID in the file, and the restore leases past it
	// (else the new cluster could hand such an ID out again).
	if err := n.metaReadPointStep(ctx); err != nil {
		return nil, fmt.Errorf("meta group, after the shards: %w", err)
	}
	next, err := n.meta.NextID()
	if err != nil {
		return nil, err
	}
	bw.SetNextID(max(next, m.NextID))
	if err := bw.Close(); err != nil {
		return nil, err
	}
	man := bw.Manifest()
	return &man, nil
}

// metaPart reads the meta group's part of a backup from this replica.
func (a *Admin) metaPart() (*backup.Meta, error) {
	n := a.n
	next, err := n.meta.NextID()
	if err != nil {
		return nil, err
	}
	keys, err := n.meta.ListKeys()
	if err != nil {
		return nil, err
	}
	cached, err := n.meta.Keys()
	if err != nil {
		return nil, err
	}
	m := &backup.Meta{NextID: next}
	for _, k := range keys {
		m.Keys = append(m.Keys, (&command.CreateKey{Key: k}).Encode())
	}
	blocked := cached.Blocked()
	for _, d := range slices.Sorted(maps.Keys(blocked)) {
		m.Blocked = append(m.Blocked, (&command.SetBlocked{Domain: d, Blocked: true, At: blocked[d]}).Encode())
	}
	return m, nil
}

// metaReadPointStep is metaReadPoint within one transfer step.
func (n *Node) metaReadPointStep(ctx context.Context) error {
	stepCtx, cancel := context.WithTimeout(ctx, transferStep)
	defer cancel()
	return n.metaReadPoint(stepCtx)
}

// metaReadPoint makes this node's meta replica hold every meta write
// acknowledged before it was called: a read point on the leader (asked
// over the peer protocol when another node leads), then this replica's
// apply up to it.
func (n *Node) metaReadPoint(ctx context.Context) error {
	g := n.meta.Group()
	for {
		var err error
		if g.IsLeader() {
			err = g.VerifyRead(ctx)
		} else if addr, _ := g.Leader(); addr == "" {
			err = link.ErrNotLeader
		} else {
			var index uint64
			if index, err = n.peers.ReadIndex(ctx, addr, command.MetaGroup); err == nil {
				err = g.WaitApplied(ctx, index)
			}
		}
		if err == nil || !(errors.Is(err, link.ErrNotLeader) || errors.Is(err, link.ErrUnavailable)) {
			return err
		}
		if pause(ctx) != nil {
			return fmt.Errorf("%w: no read point: %w", link.ErrUnavailable, err)
		}
	}
}

// backupShard writes shard s's records, read part by part on its leader.
func (a *Admin) backupShard(ctx context.Context, bw *backup.Writer, s command.ShardID) error {
	for after, first := "", true; ; first = false {
		stepCtx, cancel := context.WithTimeout(ctx, transferStep)
		part, err := a.n.links.dumpShard(stepCtx, s, after, 0)
		cancel()
		if err != nil {
			return err
		}
		if first {
			if err := bw.BeginShard(uint32(s), part.ReadAt); err != nil {
				return err
			}
		}
		for _, r := range part.Links {
			rec := backup.Record{Code: r.Code, Link: r.Record}
			if r.HasClicks() {
				rec.Clicks = r.Clicks.AppendTo(nil)
			}
			if err := bw.Record(rec); err != nil {
				return err
			}
		}
		if !part.More {
			return nil
		}
		if len(part.Links) == 0 {
			return fmt.Errorf("%w: an empty part of a dump that says more follows", link.ErrUnavailable)
		}
		after = part.Links[len(part.Links)-1].Code
	}
}

// dumpShard reads the part of shard s after code after on its leader.
func (ls *Links) dumpShard(ctx context.Context, s command.ShardID, after string, hops int) (*peer.DumpResponse, error) {
	return onLeader(ctx, ls.n, s, hops, func(sh *shard.Shard) (*peer.DumpResponse, error) {
		at := sh.AppliedIndex()
		links, more, err := sh.Dump(after, dumpBudget)
		return &peer.DumpResponse{Links: links, More: more, ReadAt: at}, err
	}, func(addr string) (*peer.DumpResponse, error) { return ls.n.peers.Dump(ctx, addr, s, after, hops+1) })
}

// buildVersion is the module version this binary was built from.
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Version
	}
	return ""
}
