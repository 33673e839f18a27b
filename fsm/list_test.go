package fsm

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
)

// TestListLinksPagesThroughTheFilteredSet: over random creates, updates
// and deletes by three owners, every query's pages (of several sizes,
// oldest or newest first) concatenate to exactly the live links that pass
// its filters, in order; and a file indexed by no one (an older version's)
// lists the same once reopened.
func TestListLinksPagesThroughTheFilteredSet(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "shard.db")
	f := mustShard(t, ShardConfig{Path: path})
	rng := rand.New(rand.NewPCG(7, 8))
	owners := []string{"alice", "bob", "carol"}
	index := uint64(0)
	live := map[string]*link.Link{}
	for i := range 400 {
		index++
		code := fmt.Sprintf("c%03d", i)
		// Creation times collide now and then: the code breaks the tie.
		now := t0.Add(time.Duration(rng.IntN(300)) * time.Second)
		c := &command.CreateIfAbsent{Code: code, Now: now, Request: link.CreateRequest{URL: fmt.Sprintf("https://e.example/%d", i), Owner: owners[rng.IntN(3)], Tags: []string{[]string{"red", "blue"}[rng.IntN(2)]}, Title: []string{"", "Report"}[rng.IntN(2)]}}
		if rng.IntN(5) == 0 {
			c.Request.ExpiresAt = t0.Add(150 * time.Second)
		}
		r := result(t, applyAt(t, f, index, c.Encode()))
		live[code] = r.Link
		switch rng.IntN(6) {
		case 0:
			index++
			applyAt(t, f, index, (&command.Delete{Code: code, Now: now}).Encode())
			delete(live, code)
		case 1:
			index++
			r := result(t, applyAt(t, f, index, (&command.Update{Code: code, Now: now, Patch: link.Patch{Tags: new([]string{"green"}), Disabled: new(true)}}).Encode()))
			live[code] = r.Link
		case 2:
			// Tags it keeps, and one it gains: counted once each.
			index++
			tags := append(slices.Clone(r.Link.Tags), "extra")
			r := result(t, applyAt(t, f, index, (&command.Update{Code: code, Now: now, Patch: link.Patch{Tags: new(tags)}}).Encode()))
			live[code] = r.Link
		}
	}
	// Human (and bot) clicks on random codes, deleted ones included, in
	// batches from two nodes.
	clicks := map[string]uint64{}
	for b := range 60 {
		var deltas []command.ClickDelta
		for range 1 + rng.IntN(12) {
			code := fmt.Sprintf("c%03d", rng.IntN(400))
			d := command.ClickDelta{Code: code, Delta: command.ClickTotals{Humans: command.Counts{Total: uint64(rng.IntN(4))}, Bots: command.Counts{Total: uint64(rng.IntN(2))}}}
			if d.Delta.Humans.Total+d.Delta.Bots.Total == 0 || slices.ContainsFunc(deltas, func(x command.ClickDelta) bool { return x.Code == code }) {
				continue
			}
			deltas = append(deltas, d)
			clicks[code] += d.Delta.Humans.Total
		}
		index++
		applyAt(t, f, index, (&command.ClickBatch{Node: []string{"n1", "n2"}[b%2], Seq: uint64(b/2 + 1), Deltas: deltas}).Encode())
	}
	yes, no := true, false
	queries := []link.ListQuery{
		{},
		{Owner: "bob"},
		{Owner: "alice", Tag: "red"},
		{Owner: "bob", Tag: "green"},
		{Owner: "carol", Tag: "blue", CreatedAfter: t0.Add(30 * time.Second)},
		{Tag: "green"},
		{Text: "REPORT"},
		{Text: "e.example/1"},
		{Owner: "carol", Disabled: &no, Expired: &yes},
		{Expired: &no},
		{CreatedAfter: t0.Add(100 * time.Second), CreatedBefore: t0.Add(200 * time.Second)},
		{Owner: "bob", CreatedBefore: t0.Add(50 * time.Second)},
		{Owner: "nobody"},
	}
	check := func(f *ShardFSM) {
		for qi, base := range queries {
			base.Now = t0.Add(200 * time.Second)
			var want []*link.Link
			for _, l := range live {
				if (base.Owner == "" || l.Owner == base.Owner) && base.Matches(l) &&
					(base.CreatedAfter.IsZero() || l.CreatedAt.After(base.CreatedAfter)) &&
					(base.CreatedBefore.IsZero() || l.CreatedAt.Before(base.CreatedBefore)) {
					want = append(want, l)
				}
			}
			for _, byClicks := range []bool{false, true} {
				slices.SortFunc(want, func(a, b *link.Link) int {
					c := 0
					if byClicks {
						c = cmp.Compare(clicks[a.Code], clicks[b.Code])
					}
					if c == 0 {
						c = a.CreatedAt.Compare(b.CreatedAt)
					}
					if c != 0 {
						return c
					}
					return cmp.Compare(a.Code, b.Code)
				})
				for _, desc := range []bool{false, true} {
					if desc {
						slices.Reverse(want)
					}
					for _, limit := range []int{1, 7, 1000} {
						// A scan budget (0: none) may end a page early, at
						// the position it stopped at.
						for _, scan := range []int{0, 3, 40} {
							q := base
							q.Desc, q.Limit, q.ByClicks, q.Scan = desc, limit, byClicks, scan
							var got []string
							for page := 0; ; page++ {
								res, err := f.ListLinks(q)
								if err != nil {
									t.Fatal(err)
								}
								ls, ns := res.Links, res.Clicks
								for i, l := range ls {
									got = append(got, l.Code)
									if ns[i] != clicks[l.Code] {
										t.Fatalf("query %d: %s listed with %d clicks, has %d", qi, l.Code, ns[i], clicks[l.Code])
									}
								}
								if scan == 0 && res.Stop != nil {
									t.Fatalf("query %d: a scan without a budget stopped at %v", qi, res.Stop)
								}
								if res.Stop != nil && len(ls) >= limit {
									t.Fatalf("query %d: a full page (%d links) says it stopped at %v", qi, len(ls), res.Stop)
								}
								if page > 1000 {
									t.Fatalf("query %d: over %d pages for 400 links", qi, page)
								}
								if res.Stop != nil {
									q.After = res.Stop
									continue
								}
								if len(ls) < limit {
									break
								}
								last := ls[len(ls)-1]
								q.After = &link.ListPosition{Created: last.CreatedAt, Code: last.Code, Clicks: ns[len(ns)-1]}
							}
							var wantCodes []string
							for _, l := range want {
								wantCodes = append(wantCodes, l.Code)
							}
							if !slices.Equal(got, wantCodes) {
								t.Fatalf("query %d (by clicks %v, desc %v, limit %d, scan %d): got %d codes %v\nwant %d %v", qi, byClicks, desc, limit, scan, len(got), got, len(wantCodes), wantCodes)
							}
						}
					}
					if desc {
						slices.Reverse(want)
					}
				}
			}
		}
		// The tag index holds exactly the live links' tags: an update
		// that changed a link's tags took its old entries away.
		tags := 0
		for _, l := range live {
			tags += len(l.Tags)
		}
		// The tag counts, every owner's and each one's, are the live
		// links' tags.
		for _, owner := range append([]string{""}, owners...) {
			want := map[string]uint64{}
			for _, l := range live {
				if owner == "" || l.Owner == owner {
					for _, tag := range l.Tags {
						want[tag]++
					}
				}
			}
			got, err := f.TagCounts(owner)
			if err != nil || !maps.Equal(got, want) {
				t.Fatalf("tag counts of %q: %v %v, want %v", owner, got, err, want)
			}
		}
		// The click indexes hold one entry per live link with human
		// clicks, at its clicks (the listing checks above find them).
		clicked := 0
		for code := range live {
			if clicks[code] > 0 {
				clicked++
			}
		}
		if clicked == 0 || clicked == len(live) {
			t.Fatalf("%d of %d live links clicked: the test lost its point", clicked, len(live))
		}
		if err := f.view(func(tx *bolt.Tx) error {
			if n := tx.Bucket(bucketByTag).Stats().KeyN; n != tags {
				return fmt.Errorf("%d tag index entries for %d tags of live links", n, tags)
			}
			for _, b := range [][]byte{bucketByClicks, bucketByClicksAll} {
				if n := tx.Bucket(b).Stats().KeyN; n != clicked {
					return fmt.Errorf("%d entries in %s for %d clicked live links", n, b, clicked)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	check(f)
	if len(live) < 200 {
		t.Fatalf("only %d live links: the test lost its point", len(live))
	}
	// offline changes the closed file as another version would, then
	// reopens it with this one and checks again.
	offline := func(edit func(tx *bolt.Tx) error) {
		t.Helper()
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(edit); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		f = mustShard(t, ShardConfig{Path: path})
		check(f)
	}
	// An older version's file: links, no indexes. Reopened, it lists the
	// same.
	offline(func(tx *bolt.Tx) error {
		for _, b := range indexBuckets {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Delete(keyIndexed)
	})
	// A file of v3, the version before tag counts: no counts, v3's
	// marker alone. Reopened, its counts come from its tag index.
	offline(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketTagCounts, bucketTagCountsAll} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketMeta).Delete(keyIndexed); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keyIndexedV3, []byte{1})
	})
	markedOn := func(older []byte) {
		t.Helper()
		if err := f.view(func(tx *bolt.Tx) error {
			if tx.Bucket(bucketMeta).Get(older) != nil || tx.Bucket(bucketMeta).Get(keyIndexed) == nil {
				return fmt.Errorf("the %s file's markers were not moved on", older)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	markedOn(keyIndexedV3)
	// A file of v4, which put every live link in the click indexes, the
	// unclicked at 0 clicks. Reopened, those entries go.
	offline(func(tx *bolt.Tx) error {
		for code, l := range live {
			if clicks[code] == 0 {
				for _, e := range []struct{ b, prefix []byte }{{bucketByClicks, ownerPrefix([]byte(l.Owner))}, {bucketByClicksAll, nil}} {
					if err := tx.Bucket(e.b).Put(clicksKey(e.prefix, 0, l.CreatedAt, []byte(code)), nil); err != nil {
						return err
					}
				}
			}
		}
		if err := tx.Bucket(bucketMeta).Delete(keyIndexed); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keyIndexedV4, []byte{1})
	})
	markedOn(keyIndexedV4)
	// A downgrade: a v1, v2, v3 or v4 binary ran on the file (it writes
	// its marker, keeps no tag entries (v1) and no click entries (v1, v2),
	// or keeps them at 0 (v4), so some left behind are stale). Reopened by
	// this version, the indexes are built again from nothing.
	for _, older := range olderIndexed {
		offline(func(tx *bolt.Tx) error {
			if err := tx.DeleteBucket(bucketByTag); err != nil {
				return err
			}
			if _, err := tx.CreateBucket(bucketByTag); err != nil {
				return err
			}
			// A stale click entry and a stale tag count, as the older
			// binary left them.
			if err := tx.Bucket(bucketByClicksAll).Put(clicksKey(nil, 999, t0, []byte("c000")), nil); err != nil {
				return err
			}
			if err := tx.Bucket(bucketTagCountsAll).Put([]byte("red"), binary.BigEndian.AppendUint64(nil, 999)); err != nil {
				return err
			}
			return tx.Bucket(bucketMeta).Put(older, []byte{1})
		})
	}
}

// TestIndexPagesArePacked: creates append to the indexes (their keys sort
// by creation time), so their pages are packed to indexFill, not left half
// empty as bbolt's default split leaves them. Codes arrive in random order,
// as the ID permutation hands them out; the links bucket, keyed by code,
// stays at bbolt's default. The click indexes, which hold clicked links
// only, hold none of these.
func TestIndexPagesArePacked(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "shard.db")
	f, err := NewShardFSM(ShardConfig{Path: path, CommitInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const n, batch = 20000, 200
	index := uint64(0)
	for i := 0; i < n; i += batch {
		logs := make([]*raft.Log, 0, batch)
		for j := range batch {
			index++
			c := &command.CreateIfAbsent{Code: fmt.Sprintf("k%08x", rng.Uint32()), Now: t0.Add(time.Duration(i+j) * time.Millisecond), Nonce: index,
				Request: link.CreateRequest{URL: fmt.Sprintf("https://e.example/%d", i+j), Owner: []string{"alice", "bob"}[j%2], Tags: []string{"t"}}}
			logs = append(logs, &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: c.Encode()})
		}
		f.ApplyBatch(logs)
		if i%(5*batch) == 0 {
			if err := f.flushOnce(); err != nil { // several commits, as the interval makes them
				t.Fatal(err)
			}
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.View(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketByClicks, bucketByClicksAll} {
			if n := tx.Bucket(name).Stats().KeyN; n != 0 {
				t.Errorf("%s holds %d keys for links never clicked", name, n)
			}
		}
		for _, name := range [][]byte{bucketByOwner, bucketByTag, bucketByCreated} {
			st := tx.Bucket(name).Stats()
			if st.KeyN != n {
				t.Errorf("%s holds %d keys, want %d", name, st.KeyN, n)
			}
			if fill := float64(st.LeafInuse) / float64(st.LeafAlloc); fill < 0.8 {
				t.Errorf("%s: leaf pages %.0f%% full over %d pages, want at least 80%%", name, 100*fill, st.LeafPageN)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
