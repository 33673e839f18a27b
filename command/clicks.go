package command

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/linkraft/linkraft/internal/wire"
)

// MaxBreakdownKeys bounds each breakdown (countries, referrers, ...) per
// code and audience; later new keys are counted under OtherKey.
const MaxBreakdownKeys = 500

// OtherKey collects breakdown keys past MaxBreakdownKeys.
const OtherKey = "(other)"

// Counts are the clicks of one audience (humans or bots) of a code.
type Counts struct {
	Total     uint64
	Countries map[string]uint64
	Devices   map[string]uint64
	Browsers  map[string]uint64
	OS        map[string]uint64
	Referrers map[string]uint64
	// Visitors is a HyperLogLog sketch (axiomhq/hyperloglog, binary form)
	// of salted visitor hashes; empty if none were recorded.
	Visitors []byte
}

// ClickTotals are a code's counts since it was created.
type ClickTotals struct {
	Humans, Bots Counts
}

// HourCount is the clicks of one code in one UTC hour.
type HourCount struct {
	Hour   uint64 // Unix time / 3600
	Humans uint64
	Bots   uint64
}

// ClickDelta is what one batch adds to one code.
type ClickDelta struct {
	Code  string
	Delta ClickTotals
	Hours []HourCount
}

// ClickBatch is a node's aggregated clicks for one shard. Seq grows with
// every batch the node makes for the shard (across restarts too); the FSM
// applies a batch only if its Seq is above the highest it has applied for
// that node, so a batch retried after an unknown outcome never counts twice.
type ClickBatch struct {
	Node   string
	Seq    uint64
	Deltas []ClickDelta
}

const (
	fBatchNode  = 1
	fBatchSeq   = 2
	fBatchDelta = 3

	fDeltaCode   = 1
	fDeltaHumans = 2
	fDeltaBots   = 3
	fDeltaHour   = 4

	fHourHour   = 1
	fHourHumans = 2
	fHourBots   = 3

	fCountsTotal    = 1
	fCountsCountry  = 2
	fCountsDevice   = 3
	fCountsBrowser  = 4
	fCountsOS       = 5
	fCountsReferrer = 6
	fCountsVisitors = 7
	fTotalsHumans   = 1
	fTotalsBots     = 2
	fPairKey        = 1
	fPairN          = 2
)

var countsCodec = wire.NewCodec[Counts](nil,
	wire.Uint(fCountsTotal, func(c *Counts) *uint64 { return &c.Total }),
	countsField(fCountsCountry, func(c *Counts) *map[string]uint64 { return &c.Countries }),
	countsField(fCountsDevice, func(c *Counts) *map[string]uint64 { return &c.Devices }),
	countsField(fCountsBrowser, func(c *Counts) *map[string]uint64 { return &c.Browsers }),
	countsField(fCountsOS, func(c *Counts) *map[string]uint64 { return &c.OS }),
	countsField(fCountsReferrer, func(c *Counts) *map[string]uint64 { return &c.Referrers }),
	wire.Bytes(fCountsVisitors, func(c *Counts) *[]byte { return &c.Visitors }),
)

func sortedKeys(m map[string]uint64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// totalsCodec is a code's click totals: both audiences, each always
// written.
var totalsCodec = wire.NewCodec[ClickTotals](nil,
	wire.Message(fTotalsHumans, countsCodec, func(t *ClickTotals) *Counts { return &t.Humans }),
	wire.Message(fTotalsBots, countsCodec, func(t *ClickTotals) *Counts { return &t.Bots }),
)

// AppendTo appends the totals message (the shard's record of a code's
// clicks).
func (t *ClickTotals) AppendTo(b []byte) []byte { return totalsCodec.Append(b, t) }

// Unmarshal reads what AppendTo wrote.
func (t *ClickTotals) Unmarshal(body []byte) error { return totalsCodec.DecodeInto(body, t) }

var (
	hourCodec = wire.NewCodec[HourCount](nil,
		wire.Uint(fHourHour, func(h *HourCount) *uint64 { return &h.Hour }),
		wire.Uint(fHourHumans, func(h *HourCount) *uint64 { return &h.Humans }),
		wire.Uint(fHourBots, func(h *HourCount) *uint64 { return &h.Bots }),
	)
	deltaCodec = wire.NewCodec[ClickDelta](nil,
		wire.String(fDeltaCode, func(d *ClickDelta) *string { return &d.Code }),
		wire.Message(fDeltaHumans, countsCodec, func(d *ClickDelta) *Counts { return &d.Delta.Humans }),
		wire.Message(fDeltaBots, countsCodec, func(d *ClickDelta) *Counts { return &d.Delta.Bots }),
		wire.Messages(fDeltaHour, hourCodec, func(d *ClickDelta) *[]HourCount { return &d.Hours }),
	)
	clickBatchCodec = wire.NewCodec(func(b *ClickBatch) error {
		if b.Node == "" || b.Seq == 0 {
			return fmt.Errorf("%w: click batch without node or seq", wire.ErrDecode)
		}
		return nil
	},
		wire.String(fBatchNode, func(b *ClickBatch) *string { return &b.Node }),
		wire.Uint(fBatchSeq, func(b *ClickBatch) *uint64 { return &b.Seq }),
		wire.Messages(fBatchDelta, deltaCodec, func(b *ClickBatch) *[]ClickDelta { return &b.Deltas }),
	)
)

// Encode returns the Raft entry for b.
func (b *ClickBatch) Encode() []byte {
	return clickBatchCodec.Append(append(make([]byte, 0, 32+len(b.Deltas)*128), byte(TypeClickBatch)), b)
}

// AppendTo appends the hour message (the shard's record of a code's
// hour).
func (h *HourCount) AppendTo(b []byte) []byte { return hourCodec.Append(b, h) }

// Unmarshal reads what AppendTo wrote, by hand: the codec's field table
// would make each HourCount escape to the heap, and the click merge and the
// stats query read hundreds per call.
func (h *HourCount) Unmarshal(body []byte) error {
	*h = HourCount{}
	r := wire.NewReader(body)
	for num, typ := range r.Fields() {
		switch num {
		case fHourHour:
			h.Hour = r.Uint(typ, num)
		case fHourHumans:
			h.Humans = r.Uint(typ, num)
		case fHourBots:
			h.Bots = r.Uint(typ, num)
		default:
			r.Skip(num, typ)
		}
	}
	return r.Err()
}

// mergeCounts adds d to c, bounding every breakdown.
func mergeCounts(c *Counts, d *Counts) {
	c.Total += d.Total
	for _, p := range []struct{ dst, src *map[string]uint64 }{
		{&c.Countries, &d.Countries}, {&c.Devices, &d.Devices}, {&c.Browsers, &d.Browsers}, {&c.OS, &d.OS}, {&c.Referrers, &d.Referrers},
	} {
		if len(*p.src) == 0 {
			continue
		}
		if *p.dst == nil {
			*p.dst = map[string]uint64{}
		}
		for _, k := range sortedKeys(*p.src) { // sorted: every replica caps alike
			if _, ok := (*p.dst)[k]; !ok && len(*p.dst) >= MaxBreakdownKeys {
				k2 := OtherKey
				(*p.dst)[k2] += (*p.src)[k]
				continue
			}
			(*p.dst)[k] += (*p.src)[k]
		}
	}
	c.Visitors = mergeSketches(c.Visitors, d.Visitors)
}

// MergeTotals adds d to t (breakdowns bounded, sketches merged; a sketch
// that does not decode is left out, as the shard's in-place merge does).
func MergeTotals(t *ClickTotals, d *ClickTotals) {
	mergeCounts(&t.Humans, &d.Humans)
	mergeCounts(&t.Bots, &d.Bots)
}

// ClickStats is what the stats API reads: the totals since creation and the
// hourly counts in [From, To).
type ClickStats struct {
	Totals ClickTotals
	Hours  []HourCount
}

// clickStatsCodec carries ClickStats between nodes.
var clickStatsCodec = wire.NewCodec[ClickStats](nil,
	wire.Message(1, totalsCodec, func(s *ClickStats) *ClickTotals { return &s.Totals }),
	wire.Messages(2, hourCodec, func(s *ClickStats) *[]HourCount { return &s.Hours }),
)

// AppendTo appends the stats message (a peer's answer to a stats read).
func (s *ClickStats) AppendTo(b []byte) []byte { return clickStatsCodec.Append(b, s) }

// Unmarshal reads what AppendTo wrote.
func (s *ClickStats) Unmarshal(body []byte) error { return clickStatsCodec.DecodeInto(body, s) }

// Add counts n clicks under key in breakdown dim (DimCountry ...
// DimReferrer).
func (c *Counts) Add(dim int, key string, n uint64) {
	var m *map[string]uint64
	switch dim {
	case DimCountry:
		m = &c.Countries
	case DimDevice:
		m = &c.Devices
	case DimBrowser:
		m = &c.Browsers
	case DimOS:
		m = &c.OS
	case DimReferrer:
		m = &c.Referrers
	default:
		return
	}
	if *m == nil {
		*m = map[string]uint64{}
	}
	(*m)[key] += n
}

// Breakdown dimensions, in the order Counts lists them (Counts.Add).
const (
	DimCountry = iota
	DimDevice
	DimBrowser
	DimOS
	DimReferrer
)

// countsField is a breakdown (key → count) as one {key, n} pair message
// per key, in key order; a key read twice counts the sum.
func countsField[M any](num protowire.Number, p func(*M) *map[string]uint64) wire.Field[M] {
	return wire.Field[M]{Num: num,
		Put: func(b []byte, num protowire.Number, m *M) []byte {
			mp := *p(m)
			for _, k := range sortedKeys(mp) {
				b = appendPair(b, num, k, mp[k])
			}
			return b
		},
		Get: func(r wire.Reader, typ protowire.Type, num protowire.Number, m *M) wire.Reader {
			body := r.Bytes(typ, num)
			if r.Err() != nil {
				return r
			}
			key, n, err := readPair(body)
			if err != nil {
				r.SetErr(err)
				return r
			}
			if *p(m) == nil {
				*p(m) = map[string]uint64{}
			}
			(*p(m))[string(key)] += n
			return r
		},
	}
}
