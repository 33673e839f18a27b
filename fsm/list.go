package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
)

// Listing reads five indexes of the live links, kept in the same
// transaction as the links: by owner and creation time, by owner, tag and
// creation time, by creation time alone (for a listing of every owner),
// and by human clicks, with and without the owner. An entry's key holds
// what it sorts on and the code; the owner and the creation time of a link
// never change, so an update touches only the tag entries of tags it adds
// or removes, a click batch moves the click entries of the links it
// counts, and a delete removes them all. The click indexes hold the links
// with human clicks only: most links have none, and a listing by clicks
// finds those in a creation index (see ListLinks). That spared about a
// hundred bytes a link of 10M links' files.
var (
	bucketByOwner     = []byte("links-by-owner")      // owner 0x00 created(8, BE) code -> empty
	bucketByTag       = []byte("links-by-tag")        // owner 0x00 tag 0x00 created(8, BE) code -> empty
	bucketByCreated   = []byte("links-by-created")    // created(8, BE) code -> empty
	bucketByClicks    = []byte("links-by-clicks")     // owner 0x00 clicks(8, BE) created(8, BE) code -> empty
	bucketByClicksAll = []byte("links-by-clicks-all") // clicks(8, BE) created(8, BE) code -> empty
	// The live links carrying each tag, kept with the tag index: counting
	// them would read every link.
	bucketTagCounts    = []byte("tag-counts")     // owner 0x00 tag -> count(8, BE)
	bucketTagCountsAll = []byte("tag-counts-all") // tag -> count(8, BE)
	// indexBuckets are every index, emptied before a rebuild.
	indexBuckets = [][]byte{bucketByOwner, bucketByTag, bucketByCreated, bucketByClicks, bucketByClicksAll, bucketTagCounts, bucketTagCountsAll}
	// keyIndexed, in the meta bucket, says the indexes cover every link
	// (a file of an older version has links and fewer indexes or none:
	// v1 had no tag index, v2 no click index, v3 no tag counts; v4 put
	// every link in the click indexes, the unclicked at 0). An older
	// version's marker beside it says that version ran on the file since
	// (a downgrade), and kept other indexes meanwhile, so they are built
	// again.
	keyIndexed    = []byte("indexed-v5")
	olderIndexed  = [][]byte{[]byte("indexed-v1"), []byte("indexed-v2"), []byte("indexed-v3"), []byte("indexed-v4")}
	keyIndexedV3  = olderIndexed[2]
	keyIndexedV4  = olderIndexed[3]
	maxIndexedKey = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
)

// indexFill is how full bbolt packs an index's pages when it splits them.
// Index keys begin with a creation time (after the owner, tag or click
// count), so a create appends at the end of its range, and bbolt's default
// of half full left every index page half empty: the five indexes took 313
// of the 486 MB of pages of a million links; of 300,000 links' pages they
// took 94 MB at bbolt's default and 52 MB at 0.9. etcd packs
// its revision-keyed bucket to 0.9 for the same reason. The links bucket,
// keyed by code (random), keeps the default: at 0.9 it took 1.7 times the
// pages.
const indexFill = 0.9

// fillIndexes sets the fill of tx's index buckets (bbolt keeps it per
// transaction, not in the file).
func fillIndexes(tx *bolt.Tx) {
	for _, name := range [][]byte{bucketByOwner, bucketByTag, bucketByCreated, bucketByClicks, bucketByClicksAll} {
		if b := tx.Bucket(name); b != nil {
			b.FillPercent = indexFill
		}
	}
}

// tagPrefix is the key prefix of owner's links with tag.
func tagPrefix(owner, tag string) []byte {
	return append(append(append([]byte(owner), 0), tag...), 0)
}

func tagKey(l *link.Link, tag string) []byte {
	return append(append(tagPrefix(l.Owner, tag), createdKey(l.CreatedAt)...), l.Code...)
}

// createdKey is t as 8 bytes that sort as t does (times before 1970 sort
// as 1970: no link is that old).
func createdKey(t time.Time) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(max(t.UnixNano(), 0)))
}

func ownerKey(l *link.Link) []byte {
	k := append(append([]byte(l.Owner), 0), createdKey(l.CreatedAt)...)
	return append(k, l.Code...)
}

func createdIndexKey(l *link.Link) []byte { return append(createdKey(l.CreatedAt), l.Code...) }

// clicksKey is a click index entry under prefix (the owner's, or none).
// Ties of clicks go by creation time: a new link (no clicks yet) goes at
// the end of the links without clicks, as in the creation index, not at
// a random place among them.
func clicksKey(prefix []byte, clicks uint64, created time.Time, code []byte) []byte {
	k := binary.BigEndian.AppendUint64(append(make([]byte, 0, len(prefix)+16+len(code)), prefix...), clicks)
	k = binary.BigEndian.AppendUint64(k, uint64(max(created.UnixNano(), 0)))
	return append(k, code...)
}

func ownerPrefix(owner []byte) []byte {
	return append(append(make([]byte, 0, len(owner)+1), owner...), 0)
}

// putClicks puts a live link's two click index entries (its owner's and
// the all-owners one) at clicks n; a link without clicks has none.
func putClicks(tx *bolt.Tx, owner []byte, created time.Time, code []byte, n uint64) error {
	if n == 0 {
		return nil
	}
	if err := tx.Bucket(bucketByClicks).Put(clicksKey(ownerPrefix(owner), n, created, code), nil); err != nil {
		return err
	}
	return tx.Bucket(bucketByClicksAll).Put(clicksKey(nil, n, created, code), nil)
}

// deleteClicks deletes a link's two click index entries at clicks n.
func deleteClicks(tx *bolt.Tx, owner []byte, created time.Time, code []byte, n uint64) error {
	if n == 0 {
		return nil
	}
	if err := tx.Bucket(bucketByClicks).Delete(clicksKey(ownerPrefix(owner), n, created, code)); err != nil {
		return err
	}
	return tx.Bucket(bucketByClicksAll).Delete(clicksKey(nil, n, created, code))
}

// storedClicks is the human clicks stored for code.
func storedClicks(tx *bolt.Tx, code string) (uint64, error) {
	return command.HumanClicks(tx.Bucket(bucketClicks).Get([]byte(code)))
}

// has reports whether b holds key k. Index entries have empty values, and
// bbolt's Get answers nil for an empty value put in the same transaction
// (a page gives an empty slice): Get cannot tell such an entry from none.
func has(b *bolt.Bucket, k []byte) bool {
	got, _ := b.Cursor().Seek(k)
	return bytes.Equal(got, k)
}

// index puts l's index entries, or removes them for a tombstone; old is
// the link as stored before (nil for none), whose tags l no longer has
// lose their entries. A link without clicks has no click entries.
func index(tx *bolt.Tx, old, l *link.Link) error {
	byOwner, byCreated, byTag := tx.Bucket(bucketByOwner), tx.Bucket(bucketByCreated), tx.Bucket(bucketByTag)
	if old != nil && !old.Deleted {
		for _, t := range old.Tags {
			if l.Deleted || !slices.Contains(l.Tags, t) {
				k := tagKey(old, t)
				if !has(byTag, k) {
					continue
				}
				if err := byTag.Delete(k); err != nil {
					return err
				}
				if err := countTag(tx, old.Owner, t, -1); err != nil {
					return err
				}
			}
		}
	}
	if old == nil || old.Deleted != l.Deleted {
		// Made (clicks may be stored already, for a rebuild) or deleted
		// now: an update leaves the click entries where they are.
		n, err := storedClicks(tx, l.Code)
		if err != nil {
			return fmt.Errorf("stored clicks of %q: %w", l.Code, err)
		}
		entries := putClicks
		if l.Deleted {
			entries = deleteClicks
		}
		if err := entries(tx, []byte(l.Owner), l.CreatedAt, []byte(l.Code), n); err != nil {
			return err
		}
	}
	if l.Deleted {
		if err := byOwner.Delete(ownerKey(l)); err != nil {
			return err
		}
		return byCreated.Delete(createdIndexKey(l))
	}
	for _, t := range l.Tags {
		// A tag the link had already keeps its entry and its count.
		k := tagKey(l, t)
		if has(byTag, k) {
			continue
		}
		if err := byTag.Put(k, nil); err != nil {
			return err
		}
		if err := countTag(tx, l.Owner, t, 1); err != nil {
			return err
		}
	}
	if err := byOwner.Put(ownerKey(l), nil); err != nil {
		return err
	}
	return byCreated.Put(createdIndexKey(l), nil)
}

// buildIndexes indexes every link of a file that is not indexed yet (made
// by an older version, or restored from one), 10,000 links a transaction.
// A file indexed by v3 or v4 alone is brought on from its own indexes, a
// key walk each, rather than rebuilt: v3's gets its tag counts from its tag
// index (and is then v4's), v4's loses its click entries at 0.
func buildIndexes(db *bolt.DB, log *slog.Logger) error {
	start := time.Now()
	for {
		var alone []byte // the one older marker, if it is alone
		done, empty := false, false
		if err := db.View(func(tx *bolt.Tx) error {
			k, _ := tx.Bucket(bucketLinks).Cursor().First()
			empty = k == nil
			meta := tx.Bucket(bucketMeta)
			done = meta.Get(keyIndexed) != nil
			for _, k := range olderIndexed {
				if meta.Get(k) == nil {
					continue
				}
				done = false
				if alone == nil && meta.Get(keyIndexed) == nil {
					alone = k
				} else {
					alone = []byte{} // two or more: a downgrade
				}
			}
			return nil
		}); err != nil || done {
			return err
		}
		if empty {
			log = slog.New(slog.DiscardHandler) // a new file: nothing to say
		}
		switch {
		case bytes.Equal(alone, keyIndexedV3):
			log.Info("counting the tags of a file indexed by the version before tag counts")
			n, err := countTagsOfV3(db)
			if err != nil {
				return err
			}
			log.Info("tags counted", "tag_entries", n, "took", time.Since(start).Round(time.Millisecond))
		case bytes.Equal(alone, keyIndexedV4):
			log.Info("dropping the click index entries of unclicked links, which the version before kept")
			n, err := dropUnclicked(db, 10000)
			if err != nil {
				return err
			}
			log.Info("unclicked entries dropped", "entries", n, "took", time.Since(start).Round(time.Millisecond))
		default:
			// Entries an older version left behind (it did not keep
			// every index) go first: the rebuild puts back what is true
			// now.
			log.Info("rebuilding the listing indexes: the file was indexed by another version, or by none")
			n, err := rebuildInBatches(db, indexBuckets, bucketLinks, 10000, keyIndexed, func(tx *bolt.Tx, k, v []byte) error {
				l, err := command.DecodeRecord(k, v)
				if err != nil {
					return fmt.Errorf("stored link %q: %w", k, err)
				}
				return index(tx, nil, l)
			})
			if err != nil {
				return err
			}
			log.Info("listing indexes rebuilt", "links", n, "took", time.Since(start).Round(time.Millisecond))
		}
	}
}

// markIndexed replaces every index marker of the file with marker.
func markIndexed(tx *bolt.Tx, marker []byte) error {
	meta := tx.Bucket(bucketMeta)
	for _, k := range append(slices.Clone(olderIndexed), keyIndexed) {
		if err := meta.Delete(k); err != nil {
			return err
		}
	}
	return meta.Put(marker, []byte{1})
}

// rebuildInBatches empties the buckets fresh, then calls each on every
// entry of the bucket from, per entries to a transaction (resuming where
// the last one ended), and at the end replaces every index marker with
// marker. It returns how many entries it walked.
func rebuildInBatches(db *bolt.DB, fresh [][]byte, from []byte, per int, marker []byte, each func(tx *bolt.Tx, k, v []byte) error) (int, error) {
	var resume []byte
	total := 0
	for done := false; !done; {
		err := db.Update(func(tx *bolt.Tx) error {
			if resume == nil {
				for _, b := range fresh {
					if err := tx.DeleteBucket(b); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
						return err
					}
					if _, err := tx.CreateBucket(b); err != nil {
						return err
					}
				}
			}
			c := tx.Bucket(from).Cursor()
			k, v := c.First()
			if resume != nil {
				k, v = c.Seek(resume)
			}
			for n := 0; k != nil && n < per; k, v = c.Next() {
				if err := each(tx, k, v); err != nil {
					return err
				}
				n++
				total++
			}
			if k != nil {
				resume = bytes.Clone(k)
				return nil
			}
			done = true
			return markIndexed(tx, marker)
		})
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// dropUnclicked deletes the click index entries at 0 clicks that v4 kept,
// per to a transaction, and then marks the file this version's. They are
// first in the all-owners index and first in each owner's range of the
// other: the walk reads them and one entry more per owner. It returns how
// many it deleted.
func dropUnclicked(db *bolt.DB, per int) (int, error) {
	total := 0
	for done := false; !done; {
		err := db.Update(func(tx *bolt.Tx) error {
			all, owners := tx.Bucket(bucketByClicksAll), tx.Bucket(bucketByClicks)
			var fromAll, fromOwners [][]byte
			c := all.Cursor()
			for k, _ := c.First(); k != nil && len(fromAll) < per && len(k) >= 8 && binary.BigEndian.Uint64(k) == 0; k, _ = c.Next() {
				fromAll = append(fromAll, bytes.Clone(k))
			}
			c = owners.Cursor()
			for k, _ := c.First(); k != nil && len(fromAll)+len(fromOwners) < per; {
				owner, rest, ok := bytes.Cut(k, []byte{0})
				if !ok || len(rest) < 8 {
					return fmt.Errorf("click index entry %q", k)
				}
				if binary.BigEndian.Uint64(rest) == 0 {
					fromOwners = append(fromOwners, bytes.Clone(k))
					k, _ = c.Next()
					continue
				}
				k, _ = c.Seek(append(bytes.Clone(owner), 1)) // the next owner's
			}
			for _, d := range []struct {
				b    *bolt.Bucket
				keys [][]byte
			}{{all, fromAll}, {owners, fromOwners}} {
				for _, k := range d.keys {
					if err := d.b.Delete(k); err != nil {
						return err
					}
				}
			}
			n := len(fromAll) + len(fromOwners)
			total += n
			if n == per {
				return nil // perhaps more
			}
			done = true
			return markIndexed(tx, keyIndexed)
		})
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// ListLinks returns up to q.Limit live links of this shard that pass q,
// in creation order (then code), or with q.ByClicks in order of human
// clicks (then creation time and code), past q.After; and each link's
// human clicks. With q.Scan it examines at most that many index entries
// (a filter the index does not answer, such as q.Text, may pass few of
// them) and says where it stopped.
//
// The click indexes hold clicked links only: a listing by clicks walks
// the links without human clicks from a creation index (they sort by
// creation time among themselves, first in ascending order, last in
// descending), skipping the clicked ones, and the rest from a click index.
func (f *ShardFSM) ListLinks(q link.ListQuery) (link.ListPart, error) {
	// The text filter runs on the stored record, before a link is decoded;
	// rest is the rest of q, for the decoded links that pass it. The text
	// is lowered once, not at every entry.
	q.Text = strings.ToLower(q.Text)
	w := listWalk{q: q, rest: q}
	w.rest.Text = ""
	err := f.view(func(tx *bolt.Tx) error {
		w.links, w.totals = tx.Bucket(bucketLinks), tx.Bucket(bucketClicks)
		// A creation index: of the owner's links with the tag, of the
		// owner's, or of every link.
		created, prefix := tx.Bucket(bucketByCreated), []byte(nil)
		switch {
		case q.Owner != "" && q.Tag != "":
			created, prefix = tx.Bucket(bucketByTag), tagPrefix(q.Owner, q.Tag)
		case q.Owner != "":
			created, prefix = tx.Bucket(bucketByOwner), ownerPrefix([]byte(q.Owner))
		}
		if !q.ByClicks {
			return w.walk(indexRange{b: created, prefix: prefix, after: q.After})
		}
		clicked := indexRange{b: tx.Bucket(bucketByClicksAll), byClicks: true}
		if q.Owner != "" {
			clicked.b, clicked.prefix = tx.Bucket(bucketByClicks), ownerPrefix([]byte(q.Owner))
		}
		unclicked := indexRange{b: created, prefix: prefix, unclicked: true}
		ranges := []*indexRange{&unclicked, &clicked}
		if q.Desc {
			ranges[0], ranges[1] = ranges[1], ranges[0]
		}
		// A position among the unclicked links (0 clicks) or the clicked
		// ones: the range before it is done, and the walk starts in its
		// own range just past it.
		if q.After != nil {
			at := &clicked
			if q.After.Clicks == 0 {
				at = &unclicked
			}
			at.after = q.After
			if ranges[1] == at {
				ranges = ranges[1:]
			}
		}
		for _, r := range ranges {
			if err := w.walk(*r); err != nil || w.full() || w.stop != nil {
				return err
			}
		}
		return nil
	})
	return link.ListPart{Links: w.out, Clicks: w.clicks, Stop: w.stop}, err
}

// indexRange is a part of an index a listing walks: the entries under
// prefix of a creation index (keys: created, code) or of a click index
// (byClicks; keys: clicks, created, code), past after.
type indexRange struct {
	b         *bolt.Bucket
	prefix    []byte
	byClicks  bool
	unclicked bool // only the links without human clicks
	after     *link.ListPosition
}

// listWalk is a listing's walk over one or two index ranges; what it has
// found, examined and where it stopped carry from one range to the next.
type listWalk struct {
	q, rest       link.ListQuery
	links, totals *bolt.Bucket
	out           []*link.Link
	clicks        []uint64
	stop          *link.ListPosition
	scanned       int
	// last is the last entry examined, of a range with lastPrefix and
	// lastByClicks.
	last         []byte
	lastPrefix   int
	lastByClicks bool
}

func (w *listWalk) full() bool { return len(w.out) >= w.q.Limit }

// walk examines r's entries in the listing's order until the page is full,
// the scan budget is spent (w.stop says where) or the range ends.
func (w *listWalk) walk(r indexRange) error {
	q, prefix := w.q, r.prefix
	c := r.b.Cursor()
	// lo and hi bound the keys (by creation time, for the creation
	// indexes); the cursor's own position comes on top.
	lo, hi := bytes.Clone(prefix), append(bytes.Clone(prefix), maxIndexedKey...)
	if !r.byClicks && !q.CreatedAfter.IsZero() {
		lo = append(bytes.Clone(prefix), createdKey(q.CreatedAfter.Add(time.Nanosecond))...)
	}
	if !r.byClicks && !q.CreatedBefore.IsZero() {
		hi = append(bytes.Clone(prefix), createdKey(q.CreatedBefore)...)
	}
	if r.after != nil {
		pos := append(append(bytes.Clone(prefix), createdKey(r.after.Created)...), r.after.Code...)
		if r.byClicks {
			pos = clicksKey(prefix, r.after.Clicks, r.after.Created, []byte(r.after.Code))
		}
		if q.Desc {
			hi = minBytes(hi, pos)
		} else {
			lo = maxBytes(lo, append(pos, 0)) // just past it
		}
	}
	var k []byte
	if q.Desc {
		k, _ = c.Seek(hi)
		if k == nil {
			k, _ = c.Last()
		}
		for k != nil && bytes.Compare(k, hi) >= 0 {
			k, _ = c.Prev()
		}
	} else {
		k, _ = c.Seek(lo)
	}
	for ; k != nil && !w.full(); k, w.scanned = step(c, q.Desc), w.scanned+1 {
		if !bytes.HasPrefix(k, prefix) || bytes.Compare(k, lo) < 0 || bytes.Compare(k, hi) >= 0 {
			break
		}
		if q.Scan > 0 && w.scanned == q.Scan {
			p := indexPosition(w.last[w.lastPrefix:], w.lastByClicks)
			w.stop = &p
			break
		}
		w.last, w.lastPrefix, w.lastByClicks = k, len(prefix), r.byClicks
		code := k[len(prefix)+8:]
		if r.byClicks {
			code = k[len(prefix)+16:]
		}
		if r.unclicked {
			n, err := command.HumanClicks(w.totals.Get(code))
			if err != nil {
				return fmt.Errorf("stored clicks of %q: %w", code, err)
			}
			if n > 0 {
				continue // listed from the click index
			}
		}
		v := w.links.Get(code)
		if v == nil {
			return fmt.Errorf("index entry of %q without its link", code)
		}
		if q.Text != "" {
			// Most links of a text search do not pass: they are
			// not decoded.
			rv, err := command.ViewRecord(v)
			if err != nil {
				return fmt.Errorf("stored link %q: %w", code, err)
			}
			if !link.MatchesText(&q, code, rv.URL, rv.Title) {
				continue
			}
		}
		l, err := command.DecodeRecord(code, v)
		if err != nil {
			return fmt.Errorf("stored link %q: %w", code, err)
		}
		if l.Deleted || !w.rest.Matches(l) {
			continue
		}
		if r.byClicks && (!q.CreatedAfter.IsZero() && !l.CreatedAt.After(q.CreatedAfter) ||
			!q.CreatedBefore.IsZero() && !l.CreatedAt.Before(q.CreatedBefore)) {
			continue
		}
		var n uint64 // the unclicked have none
		switch {
		case r.byClicks:
			n = binary.BigEndian.Uint64(k[len(prefix):])
		case !r.unclicked:
			if n, err = command.HumanClicks(w.totals.Get(code)); err != nil {
				return fmt.Errorf("stored clicks of %q: %w", code, err)
			}
		}
		w.out, w.clicks = append(w.out, l), append(w.clicks, n)
	}
	return nil
}

// indexPosition is the listing position of a creation or click index
// entry (its key without the prefix). It copies what it keeps.
func indexPosition(k []byte, byClicks bool) link.ListPosition {
	var p link.ListPosition
	if byClicks {
		p.Clicks, k = binary.BigEndian.Uint64(k), k[8:]
	}
	p.Created = time.Unix(0, int64(binary.BigEndian.Uint64(k))).UTC()
	p.Code = string(k[8:])
	return p
}

func step(c *bolt.Cursor, desc bool) []byte {
	if desc {
		k, _ := c.Prev()
		return k
	}
	k, _ := c.Next()
	return k
}

func minBytes(a, b []byte) []byte {
	if bytes.Compare(a, b) <= 0 {
		return a
	}
	return b
}

func maxBytes(a, b []byte) []byte {
	if bytes.Compare(a, b) >= 0 {
		return a
	}
	return b
}

// countTagsOfV3 makes the tag counts of a file indexed by v3, whose other
// indexes are v4's, from its tag index: a key walk, 100,000 entries a
// transaction, rather than a rebuild that decodes every link. The file is
// then v4's.
func countTagsOfV3(db *bolt.DB) (int, error) {
	return rebuildInBatches(db, [][]byte{bucketTagCounts, bucketTagCountsAll}, bucketByTag, 100000, keyIndexedV4, func(tx *bolt.Tx, k, _ []byte) error {
		// owner 0x00 tag 0x00 created code
		owner, rest, ok1 := bytes.Cut(k, []byte{0})
		tag, _, ok2 := bytes.Cut(rest, []byte{0})
		if !ok1 || !ok2 {
			return fmt.Errorf("tag index entry %q", k)
		}
		return countTag(tx, string(owner), string(tag), 1)
	})
}

// countTag adds delta to the counts of owner's live links with tag, and
// every owner's; a count that reaches 0 goes. The counts move with the
// tag index's entries, in one transaction, and are rebuilt with it; were
// one below zero all the same, it stays at zero: a wrong count is no
// reason to halt the shard's apply.
func countTag(tx *bolt.Tx, owner, tag string, delta int) error {
	for _, c := range []struct {
		b []byte
		k []byte
	}{
		{bucketTagCounts, append(ownerPrefix([]byte(owner)), tag...)},
		{bucketTagCountsAll, []byte(tag)},
	} {
		b := tx.Bucket(c.b)
		var n uint64
		if v := b.Get(c.k); len(v) == 8 {
			n = binary.BigEndian.Uint64(v)
		}
		n = uint64(max(int64(n)+int64(delta), 0))
		var err error
		if n == 0 {
			err = b.Delete(c.k)
		} else {
			err = b.Put(c.k, binary.BigEndian.AppendUint64(nil, n))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// TagCounts counts the tags of this shard's live links (owner's, or every
// owner's), read from the counts the apply keeps: as many reads as the
// distinct tags, whatever the links.
func (f *ShardFSM) TagCounts(owner string) (map[string]uint64, error) {
	out := map[string]uint64{}
	err := f.view(func(tx *bolt.Tx) error {
		b, prefix := tx.Bucket(bucketTagCountsAll), []byte(nil)
		if owner != "" {
			b, prefix = tx.Bucket(bucketTagCounts), ownerPrefix([]byte(owner))
		}
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if len(v) != 8 {
				return fmt.Errorf("tag count of %q: %d bytes", k, len(v))
			}
			out[string(k[len(prefix):])] = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	return out, err
}
