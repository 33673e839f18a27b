package fsm

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

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
		c := &command.CreateIfAbsent{Code: code, URL: fmt.Sprintf("https://e.example/%d", i), Owner: owners[rng.IntN(3)], Now: now,
			Tags: []string{[]string{"red", "blue"}[rng.IntN(2)]}, Title: []string{"", "Report"}[rng.IntN(2)]}
		if rng.IntN(5) == 0 {
			c.ExpiresAt = t0.Add(150 * time.Second)
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
			r := result(t, applyAt(t, f, index, (&command.Update{Code: code, Now: now, Set: command.SetTags | command.SetDisabled, Tags: []string{"green"}, Disabled: true}).Encode()))
			live[code] = r.Link
		}
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
			slices.SortFunc(want, func(a, b *link.Link) int {
				if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
					return c
				}
				return cmp.Compare(a.Code, b.Code)
			})
			for _, desc := range []bool{false, true} {
				if desc {
					slices.Reverse(want)
				}
				for _, limit := range []int{1, 7, 1000} {
					q := base
					q.Desc, q.Limit = desc, limit
					var got []string
					for page := 0; ; page++ {
						ls, err := f.ListLinks(q)
						if err != nil {
							t.Fatal(err)
						}
						for _, l := range ls {
							got = append(got, l.Code)
						}
						if len(ls) < limit || page > len(want) {
							break
						}
						last := ls[len(ls)-1]
						q.After = &link.ListPosition{Created: last.CreatedAt, Code: last.Code}
					}
					var wantCodes []string
					for _, l := range want {
						wantCodes = append(wantCodes, l.Code)
					}
					if !slices.Equal(got, wantCodes) {
						t.Fatalf("query %d (desc %v, limit %d): got %d codes %v\nwant %d %v", qi, desc, limit, len(got), got, len(wantCodes), wantCodes)
					}
				}
				if desc {
					slices.Reverse(want)
				}
			}
		}
		// The tag index holds exactly the live links' tags: an update
		// that changed a link's tags took its old entries away.
		tags := 0
		for _, l := range live {
			tags += len(l.Tags)
		}
		if err := f.view(func(tx *bolt.Tx) error {
			if n := tx.Bucket(bucketByTag).Stats().KeyN; n != tags {
				return fmt.Errorf("%d tag index entries for %d tags of live links", n, tags)
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
	// An older version's file: links, no indexes. Reopened, it lists the
	// same.
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketByOwner, bucketByCreated, bucketByTag} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Delete(keyIndexed)
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	f = mustShard(t, ShardConfig{Path: path})
	check(f)
	// A downgrade: a v1 binary ran on the file (it writes its marker and
	// keeps no tag entries). Reopened by this version, the indexes are
	// built again, tag entries included.
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketByTag); err != nil {
			return err
		}
		if _, err := tx.CreateBucket(bucketByTag); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keyIndexedV1, []byte{1})
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	check(mustShard(t, ShardConfig{Path: path}))
}
