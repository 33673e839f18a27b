package command

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/axiomhq/hyperloglog"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/linkraft/linkraft/internal/wire"
)

// A click batch is applied in place: the stored Counts of a code and the
// batch's delta are read as sorted lists of (key, n) that point into their
// encoded bytes, merged in one pass and written back (TotalsMerger).
// Nothing is decoded into maps, so the cost per code is a few bbolt lookups
// and one copy of its record. The result is byte for byte what decoding
// into ClickTotals, MergeTotals and AppendTo would give
// (TestMergeInPlaceMatchesMaps).

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
	r := wire.NewReader(body)
	for num, typ := range r.Fields() {
		d := -1
		switch num {
		case fCountsTotal:
			v.total = r.Uint(typ, num)
			continue
		case fCountsVisitors:
			v.visitors = r.Bytes(typ, num)
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
			r.Skip(num, typ)
			continue
		}
		var p pair
		var err error
		if p.key, p.n, err = readPair(r.Bytes(typ, num)); err != nil {
			return err
		}
		v.dims[d] = append(v.dims[d], p)
	}
	if r.Err() != nil {
		return r.Err()
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
	r := wire.NewReader(body)
	for num, typ := range r.Fields() {
		switch num {
		case fPairKey:
			key = r.Bytes(typ, num)
		case fPairN:
			n = r.Uint(typ, num)
		default:
			r.Skip(num, typ)
		}
	}
	return key, n, r.Err()
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
	return wire.AppendUint(b, fPairN, n)
}

// TotalsMerger adds deltas to stored ClickTotals records in place,
// reusing its scratch space across the codes of a batch.
type TotalsMerger struct {
	cur, add [2]countsView
	merged   []pair
	counts   []byte
	out      []byte
}

// Add reads d's counts as the addend of the next Merge.
func (m *TotalsMerger) Add(d *Delta) error {
	for i := range d.counts {
		if err := m.add[i].parse(d.counts[i]); err != nil {
			return err
		}
	}
	return nil
}

// Merge returns stored (a ClickTotals record; nil: none) plus the addend
// of Add, as the record to store: byte for byte what decoding both,
// MergeTotals and AppendTo would give. The bytes are valid until the next
// Merge. It fails only if stored does not decode.
func (m *TotalsMerger) Merge(stored []byte) ([]byte, error) {
	m.cur[0].parse(nil)
	m.cur[1].parse(nil)
	if stored != nil {
		if err := m.parseTotals(stored); err != nil {
			return nil, err
		}
	}
	m.out = m.out[:0]
	m.appendMerged(fTotalsHumans, &m.cur[0], &m.add[0])
	m.appendMerged(fTotalsBots, &m.cur[1], &m.add[1])
	return m.out, nil
}

// appendMerged appends to m.out the Counts message field num holding
// cur plus add.
func (m *TotalsMerger) appendMerged(num protowire.Number, cur, add *countsView) {
	m.counts = wire.AppendUint(m.counts[:0], fCountsTotal, cur.total+add.total)
	for d := range numDims {
		m.merged = mergePairs(m.merged[:0], cur.dims[d], add.dims[d])
		for _, p := range m.merged {
			m.counts = appendPair(m.counts, dimFields[d], p.key, p.n)
		}
	}
	m.counts = wire.AppendBytes(m.counts, fCountsVisitors, mergeSketches(cur.visitors, add.visitors))
	m.out = wire.AppendMessage(m.out, num, m.counts)
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

// ClickBatchBody is an encoded click batch that passed validation: the
// shard applies it from the bytes, without building the batch.
type ClickBatchBody []byte

// parseClickBatch is the click batch's registry parse: the whole batch is
// read as apply reads it, writing nothing, so a batch that passes cannot
// fail halfway through its apply.
func parseClickBatch(body []byte) (any, error) {
	var d Delta
	var m TotalsMerger
	_, _, err := ReadClickBatch(body, func(b []byte) error {
		if err := d.Parse(b); err != nil {
			return err
		}
		return m.Add(&d)
	})
	if err != nil {
		return nil, err
	}
	return ClickBatchBody(body), nil
}

// ReadClickBatch reads an encoded click batch's node and sequence number,
// and runs each delta's body through delta (nil: skipped).
func ReadClickBatch(body []byte, delta func([]byte) error) (node []byte, seq uint64, err error) {
	r := wire.NewReader(body)
	for num, typ := range r.Fields() {
		switch num {
		case fBatchNode:
			node = r.Bytes(typ, num)
		case fBatchSeq:
			seq = r.Uint(typ, num)
		case fBatchDelta:
			if delta == nil {
				r.Skip(num, typ)
			} else if err := delta(r.Bytes(typ, num)); err != nil {
				return nil, 0, err
			}
		default:
			r.Skip(num, typ)
		}
	}
	if r.Err() != nil {
		return nil, 0, r.Err()
	}
	if len(node) == 0 || len(node) > maxNodeID || seq == 0 {
		return nil, 0, fmt.Errorf("%w: click batch without a node (of at most %d bytes) or seq", wire.ErrDecode, maxNodeID)
	}
	return node, seq, nil
}

// Delta is one code's delta of an encoded click batch, read in place.
type Delta struct {
	// Code is the link's code (a view of the batch).
	Code   []byte
	counts [2][]byte
	body   []byte
}

// Parse reads one delta's body into d: its code and counts, and every
// hour checked.
func (d *Delta) Parse(body []byte) error {
	d.Code, d.counts, d.body = nil, [2][]byte{}, body
	r := wire.NewReader(body)
	for num, typ := range r.Fields() {
		switch num {
		case fDeltaCode:
			d.Code = r.Bytes(typ, num)
		case fDeltaHumans:
			d.counts[0] = r.Bytes(typ, num)
		case fDeltaBots:
			d.counts[1] = r.Bytes(typ, num)
		case fDeltaHour:
			var h HourCount
			if err := h.Unmarshal(r.Bytes(typ, num)); err != nil {
				return err
			}
		default:
			r.Skip(num, typ)
		}
	}
	return r.Err()
}

// Hours calls fn with each hour of the delta, in order.
func (d *Delta) Hours(fn func(HourCount) error) error {
	r := wire.NewReader(d.body)
	for num, typ := range r.Fields() {
		if num != fDeltaHour {
			r.Skip(num, typ)
			continue
		}
		var h HourCount
		if err := h.Unmarshal(r.Bytes(typ, num)); err != nil {
			return err
		}
		if err := fn(h); err != nil {
			return err
		}
	}
	return r.Err()
}

// parseTotals reads a stored ClickTotals into m.cur.
func (m *TotalsMerger) parseTotals(v []byte) error {
	r := wire.NewReader(v)
	for num, typ := range r.Fields() {
		var err error
		switch num {
		case fTotalsHumans:
			err = m.cur[0].parse(r.Bytes(typ, num))
		case fTotalsBots:
			err = m.cur[1].parse(r.Bytes(typ, num))
		default:
			r.Skip(num, typ)
		}
		if err != nil {
			return err
		}
	}
	return r.Err()
}

// HumanClicks reads the human visit count of a stored ClickTotals record
// (nil: 0) without decoding its breakdowns.
func HumanClicks(stored []byte) (uint64, error) {
	var n uint64
	r := wire.NewReader(stored)
	for num, typ := range r.Fields() {
		if num != fTotalsHumans {
			r.Skip(num, typ)
			continue
		}
		c := wire.NewReader(r.Bytes(typ, num))
		for cn, ct := range c.Fields() {
			if cn == fCountsTotal {
				n = c.Uint(ct, cn)
			} else {
				c.Skip(cn, ct)
			}
		}
		if err := c.Err(); err != nil {
			return 0, err
		}
	}
	return n, r.Err()
}

// HumanTotals returns the human visit count before and after the last
// Merge.
func (m *TotalsMerger) HumanTotals() (before, after uint64) {
	return m.cur[0].total, m.cur[0].total + m.add[0].total
}
