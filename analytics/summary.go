package analytics

import (
	"sort"
	"time"

	"github.com/axiomhq/hyperloglog"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
)

// Summarize turns a replica's click state of a link (created at since) into
// the statistics q asks for: the period's counts and series from the hourly
// counts, the selected audience's unique-visitor estimate and its top
// breakdowns.
func Summarize(st *command.ClickStats, q link.StatsQuery, since time.Time) *link.Stats {
	out := &link.Stats{Since: since.UTC()}
	byStep := map[int64]*link.StatsPoint{}
	for _, h := range st.Hours {
		t := time.Unix(int64(h.Hour)*3600, 0).UTC()
		if t.Before(q.From) || !t.Before(q.To) {
			continue
		}
		out.Humans += h.Humans
		out.Bots += h.Bots
		k := t.Truncate(q.Step).Unix()
		p := byStep[k]
		if p == nil {
			p = &link.StatsPoint{Time: t.Truncate(q.Step)}
			byStep[k] = p
		}
		p.Humans += h.Humans
		p.Bots += h.Bots
	}
	out.Series = []link.StatsPoint{}
	for t := q.From; t.Before(q.To); t = t.Add(q.Step) {
		p := link.StatsPoint{Time: t}
		if got := byStep[t.Unix()]; got != nil {
			p = *got
		}
		out.Series = append(out.Series, p)
	}
	var c command.Counts
	switch q.Bots {
	case link.BotsOnly:
		c = st.Totals.Bots
	case link.BotsInclude:
		// Summed into fresh maps: st's own are left as they are.
		var both command.ClickTotals
		command.MergeTotals(&both, &command.ClickTotals{Humans: st.Totals.Humans})
		command.MergeTotals(&both, &command.ClickTotals{Humans: st.Totals.Bots})
		c = both.Humans
	default:
		c = st.Totals.Humans
	}
	out.Uniques = estimate(c.Visitors)
	out.Countries, out.Devices, out.Browsers = topN(c.Countries, q.Top), topN(c.Devices, q.Top), topN(c.Browsers, q.Top)
	out.OS, out.Referrers = topN(c.OS, q.Top), topN(c.Referrers, q.Top)
	return out
}

// estimate reads a HyperLogLog sketch's cardinality (0 for none or a
// sketch it cannot read).
func estimate(sketch []byte) uint64 {
	if len(sketch) == 0 {
		return 0
	}
	sk := hyperloglog.New14()
	if sk.UnmarshalBinary(sketch) != nil {
		return 0
	}
	return sk.Estimate()
}

// topN returns the n largest counts of m, largest first, ties by key.
func topN(m map[string]uint64, n int) []link.KeyCount {
	out := make([]link.KeyCount, 0, len(m))
	for k, v := range m {
		out = append(out, link.KeyCount{Key: k, Count: v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Key < out[j].Key
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}
