package analytics

import (
	"github.com/axiomhq/hyperloglog"

	"github.com/linkraft/linkraft/command"
)

// The aggregation of one code's clicks between batches.

// agg is one code's clicks since the last batch, kept without a map per
// code: breakdown counts are a short list searched in place (an index is
// built if the list grows long), and aggs are reused from batch to batch.
type agg struct {
	total   [2]uint64 // humans, bots
	entries []aggEntry
	index   map[aggKey]int
	hours   []command.HourCount
	sketch  [2]*hyperloglog.Sketch
}

// aggEntry is one breakdown count: clicks of humans or bots under key in
// dimension Dim (command.DimCountry ...).
type aggEntry struct {
	bot bool
	Dim int
	Key string
	N   uint64
}

type aggKey struct {
	bot bool
	dim int
	key string
}

// linearEntries is how long an agg's breakdown list grows before it gets
// an index.
const linearEntries = 32

// count adds one click to the breakdown (bot, dim, key).
func (g *agg) count(bot bool, dim int, key string) {
	if g.index == nil {
		for i := range g.entries {
			e := &g.entries[i]
			if e.bot == bot && e.Dim == dim && e.Key == key {
				e.N++
				return
			}
		}
		g.entries = append(g.entries, aggEntry{bot: bot, Dim: dim, Key: key, N: 1})
		if len(g.entries) > linearEntries {
			g.index = make(map[aggKey]int, 2*len(g.entries))
			for i, e := range g.entries {
				g.index[aggKey{e.bot, e.Dim, e.Key}] = i
			}
		}
		return
	}
	k := aggKey{bot, dim, key}
	if i, ok := g.index[k]; ok {
		g.entries[i].N++
		return
	}
	g.index[k] = len(g.entries)
	g.entries = append(g.entries, aggEntry{bot: bot, Dim: dim, Key: key, N: 1})
}

func (g *agg) hour(h uint64, bot bool) {
	i := len(g.hours) - 1
	for ; i >= 0 && g.hours[i].Hour != h; i-- {
	}
	if i < 0 {
		g.hours = append(g.hours, command.HourCount{Hour: h})
		i = len(g.hours) - 1
	}
	if bot {
		g.hours[i].Bots++
	} else {
		g.hours[i].Humans++
	}
}

func (g *agg) reset() {
	g.total = [2]uint64{}
	g.entries, g.hours = g.entries[:0], g.hours[:0]
	g.index = nil
	g.sketch = [2]*hyperloglog.Sketch{}
}
