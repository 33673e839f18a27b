package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/axiomhq/hyperloglog"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/linkraft/linkraft/link"
)

// The click batch is applied in place: the stored Counts of a code and the
// batch's delta are read as sorted lists of (key, n) that point into their
// encoded bytes, merged in one pass and written back. Nothing is decoded
// into maps, so the cost per code is a few bbolt lookups and one copy of
// its record. The result is byte for byte what decoding into ClickTotals,
// MergeTotals and appendTotals would give (TestMergeInPlaceMatchesMaps).

// numDims is the number of breakdowns of a Counts.
const numDims = 5

// dimFields are the breakdowns' field numbers, in encoding order.
var dimFields = [numDims]protowire.Number{fCountsCountry, fCountsDevice, fCountsBrowser, fCountsOS, fCountsReferrer}

// pair is one breakdown entry; key points into the encoded bytes.
type pair struct {
	key []byte
	n   uint64
}

// countsView is an encoded Counts read in place.
type countsView struct {
	total    uint64
	dims     [numDims][]pair
	visitors []byte
}

// parse reads body into v, reusing v's slices. Breakdown lists come out
// sorted by key with no key twice (a list that is not is sorted and
// summed, as decoding into a map would).
func (v *countsView) parse(body []byte) error {
	v.total, v.visitors = 0, nil
	for i := range v.dims {
		v.dims[i] = v.dims[i][:0]
	}
	r := fieldReader{b: body}
	for num, typ := range r.fields() {
		d := -1
		switch num {
		case fCountsTotal:
			v.total = r.uint(typ, num)
			continue
		case fCountsVisitors:
			v.visitors = r.bytes(typ, num)
			continue
		case fCountsCountry:
			d = 0
		case fCountsDevice:
			d = 1
		case fCountsBrowser:
			d = 2
		case fCountsOS:
			d = 3
		case fCountsReferrer:
			d = 4
		default:
			r.skip(num, typ)
			continue
		}
		var p pair
		var err error
		if p.key, p.n, err = readPair(r.bytes(typ, num)); err != nil {
			return err
		}
		v.dims[d] = append(v.dims[d], p)
	}
	if r.err != nil {
		return r.err
	}
	for i := range v.dims {
		v.dims[i] = normalizePairs(v.dims[i])
	}
	return nil
}

// normalizePairs sorts ps by key and sums repeated keys, in place; a list
// already in order (the usual case) is returned as it is.
func normalizePairs(ps []pair) []pair {
	sorted := true
	for i := 1; i < len(ps); i++ {
		if bytes.Compare(ps[i-1].key, ps[i].key) >= 0 {
			sorted = false
			break
		}
	}
	if sorted {
		return ps
	}
	slices.SortStableFunc(ps, func(a, b pair) int { return bytes.Compare(a.key, b.key) })
	out := ps[:0]
	for _, p := range ps {
		if len(out) > 0 && bytes.Equal(out[len(out)-1].key, p.key) {
			out[len(out)-1].n += p.n
			continue
		}
		out = append(out, p)
	}
	return out
}

var otherKey = []byte(OtherKey)

// mergePairs appends to dst the merge of cur and add (both sorted, keys
// unique), bounding the result as mergeCounts does: add's keys are taken
// in order, and a key cur lacks goes under OtherKey once the list holds
// MaxBreakdownKeys keys.
func mergePairs(dst, cur, add []pair) []pair {
	start := len(dst)
	n := len(cur)
	// otherIn: OtherKey is a key of the result already (counted in n).
	otherIn := slices.ContainsFunc(cur, func(p pair) bool { return bytes.Equal(p.key, otherKey) })
	var toOther uint64
	i := 0
	for _, a := range add {
		for i < len(cur) && bytes.Compare(cur[i].key, a.key) < 0 {
			dst = append(dst, cur[i])
			i++
		}
		if i < len(cur) && bytes.Equal(cur[i].key, a.key) {
			dst = append(dst, pair{cur[i].key, cur[i].n + a.n})
			i++
			continue
		}
		isOther := bytes.Equal(a.key, otherKey)
		if isOther && otherIn {
			toOther += a.n // already a key
			continue
		}
		if n >= MaxBreakdownKeys {
			toOther += a.n
			if !otherIn {
				otherIn = true
				n++
			}
			continue
		}
		otherIn = otherIn || isOther
		dst = append(dst, a)
		n++
	}
	dst = append(dst, cur[i:]...)
	if toOther == 0 {
		return dst
	}
	out := dst[start:]
	at, found := slices.BinarySearchFunc(out, otherKey, func(p pair, k []byte) int { return bytes.Compare(p.key, k) })
	if found {
		out[at].n += toOther
		return dst
	}
	return slices.Insert(dst, start+at, pair{otherKey, toOther})
}

// readPair reads one breakdown entry (as appendPair writes it); key is a
// view of body.
func readPair(body []byte) (key []byte, n uint64, err error) {
	r := fieldReader{b: body}
	for num, typ := range r.fields() {
		switch num {
		case fPairKey:
			key = r.bytes(typ, num)
		case fPairN:
			n = r.uint(typ, num)
		default:
			r.skip(num, typ)
		}
	}
	return key, n, r.err
}

// appendPair appends one breakdown entry as countsField writes it.
func appendPair[K string | []byte](b []byte, num protowire.Number, key K, n uint64) []byte {
	size := 0
	if len(key) > 0 {
		size += 1 + protowire.SizeBytes(len(key))
	}
	if n > 0 {
		size += 1 + protowire.SizeVarint(n)
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	if len(key) > 0 {
		b = protowire.AppendTag(b, fPairKey, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(len(key)))
		b = append(b, key...)
	}
	return appendUint(b, fPairN, n)
}

// clickMerger holds the scratch space of one batch's application.
type clickMerger struct {
	cur, add [2]countsView
	merged   []pair
	counts   []byte
	out      []byte
	// Lookups go through one cursor per bucket (a Get makes a new cursor
	// each time); Seek repositions them after every Put.
	links, totals, hours *bolt.Cursor
}

// get is Bucket.Get through a reused cursor.
func get(c *bolt.Cursor, key []byte) []byte {
	k, v := c.Seek(key)
	if !bytes.Equal(k, key) {
		return nil
	}
	return v
}

// appendMerged appends to m.out the Counts message field num holding
// cur plus add.
func (m *clickMerger) appendMerged(num protowire.Number, cur, add *countsView) {
	m.counts = appendUint(m.counts[:0], fCountsTotal, cur.total+add.total)
	for d := range numDims {
		m.merged = mergePairs(m.merged[:0], cur.dims[d], add.dims[d])
		for _, p := range m.merged {
			m.counts = appendPair(m.counts, dimFields[d], p.key, p.n)
		}
	}
	m.counts = appendBytes(m.counts, fCountsVisitors, mergeSketches(cur.visitors, add.visitors))
	m.out = appendMessage(m.out, num, m.counts)
}

// mergeSketches returns the union of two encoded HyperLogLog sketches. A
// sketch that does not decode is left out (the clicks still count), so
// every replica ends with the same bytes.
func mergeSketches(cur, add []byte) []byte {
	if len(add) == 0 {
		return cur
	}
	a := hyperloglog.New14()
	if err := a.UnmarshalBinary(add); err != nil {
		return cur
	}
	if len(cur) > 0 {
		c := hyperloglog.New14()
		if err := c.UnmarshalBinary(cur); err != nil {
			return cur
		}
		if err := c.Merge(a); err != nil {
			return cur
		}
		a = c
	}
	v, err := a.MarshalBinary()
	if err != nil {
		return cur
	}
	return v
}

// clickBatchHeader reads a click batch's node and sequence number, and
// runs each delta's body through delta (nil: skipped).
func clickBatchHeader(body []byte, delta func([]byte) error) (node []byte, seq uint64, err error) {
	r := fieldReader{b: body}
	for num, typ := range r.fields() {
		switch num {
		case fBatchNode:
			node = r.bytes(typ, num)
		case fBatchSeq:
			seq = r.uint(typ, num)
		case fBatchDelta:
			if delta == nil {
				r.skip(num, typ)
			} else if err := delta(r.bytes(typ, num)); err != nil {
				return nil, 0, err
			}
		default:
			r.skip(num, typ)
		}
	}
	if r.err != nil {
		return nil, 0, r.err
	}
	if len(node) == 0 || len(node) > maxNodeID || seq == 0 {
		return nil, 0, fmt.Errorf("%w: click batch without a node (of at most %d bytes) or seq", ErrDecode, maxNodeID)
	}
	return node, seq, nil
}

// checkClickBatch validates an encoded ClickBatch the way applyClickBatch
// reads it, writing nothing: a batch that passes cannot fail halfway
// through its apply.
func checkClickBatch(body []byte) error {
	var v countsView
	_, _, err := clickBatchHeader(body, func(d []byte) error { return checkClickDelta(&v, d) })
	return err
}

// checkClickDelta is applyClickDelta's first pass: every field of one
// code's delta decodes.
func checkClickDelta(v *countsView, body []byte) error {
	r := fieldReader{b: body}
	for num, typ := range r.fields() {
		switch num {
		case fDeltaHumans, fDeltaBots:
			if err := v.parse(r.bytes(typ, num)); err != nil {
				return err
			}
		case fDeltaHour:
			if _, err := decodeHour(r.bytes(typ, num)); err != nil {
				return err
			}
		default:
			r.skip(num, typ)
		}
	}
	return r.err
}

// applyClickBatch applies an encoded ClickBatch (see ClickBatch.Encode)
// that checkClickBatch passed.
func (f *ShardFSM) applyClickBatch(tx *bolt.Tx, body []byte) any {
	fail := func(err error) {
		// Only the state file can fail here: the entry was checked.
		panic(fmt.Sprintf("fsm %s: click batch: %v", f.path, err))
	}
	node, seq, err := clickBatchHeader(body, nil)
	if err != nil {
		fail(err)
	}
	seqs := tx.Bucket(bucketClickSeq)
	if v := seqs.Get(node); len(v) == 8 && binary.BigEndian.Uint64(v) >= seq {
		return &ClickBatchResult{Duplicate: true}
	}
	if err := seqs.Put(bytes.Clone(node), binary.BigEndian.AppendUint64(nil, seq)); err != nil {
		fail(err)
	}
	links, totals, hours := tx.Bucket(bucketLinks), tx.Bucket(bucketClicks), tx.Bucket(bucketClickHours)
	m := clickMerger{links: links.Cursor(), totals: totals.Cursor(), hours: hours.Cursor()}
	r := fieldReader{b: body}
	for num, typ := range r.fields() {
		if num != fBatchDelta {
			r.skip(num, typ)
			continue
		}
		if err := f.applyClickDelta(&m, totals, hours, r.bytes(typ, num)); err != nil {
			fail(err)
		}
	}
	if r.err != nil {
		fail(r.err)
	}
	return &ClickBatchResult{}
}

// applyClickDelta adds one code's delta to its stored totals and hours.
func (f *ShardFSM) applyClickDelta(m *clickMerger, totals, hours *bolt.Bucket, body []byte) error {
	var code []byte
	var counts [2][]byte
	// First pass: the code and the counts, and every hour checked; the
	// hours are applied in a second pass once the code is known to count.
	r := fieldReader{b: body}
	for num, typ := range r.fields() {
		switch num {
		case fDeltaCode:
			code = r.bytes(typ, num)
		case fDeltaHumans:
			counts[0] = r.bytes(typ, num)
		case fDeltaBots:
			counts[1] = r.bytes(typ, num)
		case fDeltaHour:
			if _, err := decodeHour(r.bytes(typ, num)); err != nil {
				return err
			}
		default:
			r.skip(num, typ)
		}
	}
	if r.err != nil {
		return r.err
	}
	for i := range counts {
		if err := m.add[i].parse(counts[i]); err != nil {
			return err
		}
	}
	// Clicks count toward links that exist (tombstones included: a visit
	// just before a delete is still a visit). Stored clicks mean the link
	// exists (neither links nor clicks are ever removed), which spares the
	// usual case a lookup.
	if !link.ValidCode(string(code)) {
		return nil
	}
	m.cur[0].parse(nil)
	m.cur[1].parse(nil)
	if v := get(m.totals, code); v != nil {
		if err := m.parseTotals(v); err != nil {
			panic(fmt.Sprintf("fsm %s: stored clicks of %q: %v", f.path, code, err))
		}
	} else if get(m.links, code) == nil {
		return nil
	}
	m.out = m.out[:0]
	m.appendMerged(fTotalsHumans, &m.cur[0], &m.add[0])
	m.appendMerged(fTotalsBots, &m.cur[1], &m.add[1])
	// bbolt keeps keys and values until the commit: both are copies.
	key := bytes.Clone(code)
	if err := totals.Put(key, bytes.Clone(m.out)); err != nil {
		panic(fmt.Sprintf("fsm %s: put clicks: %v", f.path, err))
	}
	r = fieldReader{b: body}
	for num, typ := range r.fields() {
		if num != fDeltaHour {
			r.skip(num, typ)
			continue
		}
		h, err := decodeHour(r.bytes(typ, num))
		if err != nil {
			return err
		}
		k := hourKey(string(code), h.Hour)
		cur := HourCount{Hour: h.Hour}
		if v := get(m.hours, k); v != nil {
			if cur, err = decodeHour(v); err != nil {
				panic(fmt.Sprintf("fsm %s: stored hour of %q: %v", f.path, code, err))
			}
		}
		cur.Hour, cur.Humans, cur.Bots = h.Hour, cur.Humans+h.Humans, cur.Bots+h.Bots
		if err := hours.Put(k, appendHour(nil, cur)); err != nil {
			panic(fmt.Sprintf("fsm %s: put click hour: %v", f.path, err))
		}
	}
	return r.err
}

// parseTotals reads a stored ClickTotals into m.cur.
func (m *clickMerger) parseTotals(v []byte) error {
	r := fieldReader{b: v}
	for num, typ := range r.fields() {
		var err error
		switch num {
		case fTotalsHumans:
			err = m.cur[0].parse(r.bytes(typ, num))
		case fTotalsBots:
			err = m.cur[1].parse(r.bytes(typ, num))
		default:
			r.skip(num, typ)
		}
		if err != nil {
			return err
		}
	}
	return r.err
}
