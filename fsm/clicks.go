package fsm

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/axiomhq/hyperloglog"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/encoding/protowire"
)

// TypeClickBatch carries a node's aggregated clicks for one shard. It only
// adds optional state, so a replica that does not know it may skip it.
const TypeClickBatch CommandType = 4 | IgnoreUnknownFlag

// Click state lives in three buckets of the shard file.
var (
	bucketClicks     = []byte("clicks")      // code -> ClickTotals
	bucketClickHours = []byte("click-hours") // code 0x00 hour(8, BE) -> HourCount
	bucketClickSeq   = []byte("click-seq")   // node -> highest applied seq (8, BE)
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

// ClickBatchResult is the FSM's response to a ClickBatch.
type ClickBatchResult struct {
	// Duplicate is set when the batch (or a later one) was applied before.
	Duplicate bool
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

func appendMessage(b []byte, num protowire.Number, msg []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, msg)
}

var countsCodec = newCodec[Counts](nil,
	uintField(fCountsTotal, func(c *Counts) *uint64 { return &c.Total }),
	countsField(fCountsCountry, func(c *Counts) *map[string]uint64 { return &c.Countries }),
	countsField(fCountsDevice, func(c *Counts) *map[string]uint64 { return &c.Devices }),
	countsField(fCountsBrowser, func(c *Counts) *map[string]uint64 { return &c.Browsers }),
	countsField(fCountsOS, func(c *Counts) *map[string]uint64 { return &c.OS }),
	countsField(fCountsReferrer, func(c *Counts) *map[string]uint64 { return &c.Referrers }),
	bytesField(fCountsVisitors, func(c *Counts) *[]byte { return &c.Visitors }),
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
var totalsCodec = newCodec[ClickTotals](nil,
	messageField(fTotalsHumans, countsCodec, func(t *ClickTotals) *Counts { return &t.Humans }),
	messageField(fTotalsBots, countsCodec, func(t *ClickTotals) *Counts { return &t.Bots }),
)

func appendTotals(b []byte, t *ClickTotals) []byte { return totalsCodec.append(b, t) }

func decodeTotals(body []byte) (ClickTotals, error) {
	var t ClickTotals
	err := totalsCodec.decodeInto(body, &t)
	return t, err
}

var (
	hourCodec = newCodec[HourCount](nil,
		uintField(fHourHour, func(h *HourCount) *uint64 { return &h.Hour }),
		uintField(fHourHumans, func(h *HourCount) *uint64 { return &h.Humans }),
		uintField(fHourBots, func(h *HourCount) *uint64 { return &h.Bots }),
	)
	deltaCodec = newCodec[ClickDelta](nil,
		strField(fDeltaCode, func(d *ClickDelta) *string { return &d.Code }),
		messageField(fDeltaHumans, countsCodec, func(d *ClickDelta) *Counts { return &d.Delta.Humans }),
		messageField(fDeltaBots, countsCodec, func(d *ClickDelta) *Counts { return &d.Delta.Bots }),
		messagesField(fDeltaHour, hourCodec, func(d *ClickDelta) *[]HourCount { return &d.Hours }),
	)
	clickBatchCodec = newCodec(func(b *ClickBatch) error {
		if b.Node == "" || b.Seq == 0 {
			return fmt.Errorf("%w: click batch without node or seq", ErrDecode)
		}
		return nil
	},
		strField(fBatchNode, func(b *ClickBatch) *string { return &b.Node }),
		uintField(fBatchSeq, func(b *ClickBatch) *uint64 { return &b.Seq }),
		messagesField(fBatchDelta, deltaCodec, func(b *ClickBatch) *[]ClickDelta { return &b.Deltas }),
	)
)

// Encode returns the Raft entry for b.
func (b *ClickBatch) Encode() []byte {
	return clickBatchCodec.append(append(make([]byte, 0, 32+len(b.Deltas)*128), byte(TypeClickBatch)), b)
}

func appendHour(b []byte, h HourCount) []byte { return hourCodec.append(b, &h) }

// decodeHour reads an hour row as hourCodec writes it, by hand: the
// codec's field table would make each HourCount escape to the heap, and
// the click merge and the stats query read hundreds per call.
func decodeHour(body []byte) (HourCount, error) {
	var h HourCount
	r := fieldReader{b: body}
	for num, typ := range r.fields() {
		switch num {
		case fHourHour:
			h.Hour = r.uint(typ, num)
		case fHourHumans:
			h.Humans = r.uint(typ, num)
		case fHourBots:
			h.Bots = r.uint(typ, num)
		default:
			r.skip(num, typ)
		}
	}
	return h, r.err
}

func decodeClickBatch(body []byte) (*ClickBatch, error) { return clickBatchCodec.decode(body) }

// mergeCounts adds d to c, bounding every breakdown.
func mergeCounts(c *Counts, d *Counts) error {
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
	if len(d.Visitors) == 0 {
		return nil
	}
	add := hyperloglog.New14()
	if err := add.UnmarshalBinary(d.Visitors); err != nil {
		return err
	}
	if len(c.Visitors) > 0 {
		cur := hyperloglog.New14()
		if err := cur.UnmarshalBinary(c.Visitors); err != nil {
			return err
		}
		if err := cur.Merge(add); err != nil {
			return err
		}
		add = cur
	}
	v, err := add.MarshalBinary()
	if err != nil {
		return err
	}
	c.Visitors = v
	return nil
}

// MergeTotals adds d to t (breakdowns bounded, sketches merged).
func MergeTotals(t *ClickTotals, d *ClickTotals) error {
	if err := mergeCounts(&t.Humans, &d.Humans); err != nil {
		return err
	}
	return mergeCounts(&t.Bots, &d.Bots)
}

func hourKey(code string, hour uint64) []byte {
	k := make([]byte, 0, len(code)+9)
	k = append(k, code...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, hour)
}

// ClickStats is what the stats API reads: the totals since creation and the
// hourly counts in [From, To).
type ClickStats struct {
	Totals ClickTotals
	Hours  []HourCount
}

// Clicks reads code's click state from this replica (it may lag the
// leader by the replication delay). Unknown codes have zero counts.
func (f *ShardFSM) Clicks(code string, from, to time.Time) (*ClickStats, error) {
	st := &ClickStats{}
	err := f.view(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketClicks).Get([]byte(code)); v != nil {
			t, err := decodeTotals(v)
			if err != nil {
				return err
			}
			st.Totals = t
		}
		lo := uint64(max(from.Unix(), 0)) / 3600
		hi := uint64(max(to.Unix(), 0)+3599) / 3600
		c := tx.Bucket(bucketClickHours).Cursor()
		prefix := append([]byte(code), 0)
		for k, v := c.Seek(hourKey(code, lo)); k != nil && len(k) == len(prefix)+8 && string(k[:len(prefix)]) == string(prefix); k, v = c.Next() {
			h, err := decodeHour(v)
			if err != nil {
				return err
			}
			if h.Hour >= hi {
				break
			}
			st.Hours = append(st.Hours, h)
		}
		return nil
	})
	return st, err
}

// clickStatsCodec carries ClickStats between nodes.
var clickStatsCodec = newCodec[ClickStats](nil,
	messageField(1, totalsCodec, func(s *ClickStats) *ClickTotals { return &s.Totals }),
	messagesField(2, hourCodec, func(s *ClickStats) *[]HourCount { return &s.Hours }),
)

// EncodeClickStats and DecodeClickStats carry ClickStats between nodes.
func EncodeClickStats(s *ClickStats) []byte { return clickStatsCodec.append(nil, s) }

// DecodeClickStats parses what EncodeClickStats returned.
func DecodeClickStats(body []byte) (*ClickStats, error) { return clickStatsCodec.decode(body) }

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
