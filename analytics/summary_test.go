package analytics

import (
	"testing"
	"time"

	"github.com/axiomhq/hyperloglog"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
)

func sketchOf(tb testing.TB, hashes ...uint64) []byte {
	sk := hyperloglog.New14()
	for _, h := range hashes {
		sk.InsertHash(h * 0x9E3779B97F4A7C15) // spread over the registers
	}
	b, err := sk.MarshalBinary()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestSummarizeBucketsFiltersAndMerges: hourly counts fall into day
// buckets inside [from, to) only; the bot filter picks the audience of the
// counts, uniques and breakdowns, and "include" merges both sketches.
func TestSummarizeBucketsFiltersAndMerges(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	hour := func(t time.Time) uint64 { return uint64(t.Unix() / 3600) }
	st := &command.ClickStats{
		Totals: command.ClickTotals{
			Humans: command.Counts{Total: 5, Countries: map[string]uint64{"DE": 3, "FR": 2, "US": 2}, Visitors: sketchOf(t, 1, 2, 3)},
			Bots:   command.Counts{Total: 2, Countries: map[string]uint64{"US": 2}, Visitors: sketchOf(t, 3, 4)},
		},
		Hours: []command.HourCount{
			{Hour: hour(from.Add(-time.Hour)), Humans: 100}, // before the period
			{Hour: hour(from.Add(time.Hour)), Humans: 3, Bots: 1},
			{Hour: hour(from.Add(25 * time.Hour)), Humans: 2, Bots: 1},
			{Hour: hour(from.Add(72 * time.Hour)), Humans: 100}, // after it
		},
	}
	q := link.StatsQuery{From: from, To: from.Add(72 * time.Hour), Step: 24 * time.Hour, Bots: link.BotsExclude, Top: 2}
	got := Summarize(st, q, from)
	if got.Humans != 5 || got.Bots != 2 || len(got.Series) != 3 {
		t.Fatalf("period: humans %d bots %d, %d points", got.Humans, got.Bots, len(got.Series))
	}
	if p := got.Series[0]; !p.Time.Equal(from) || p.Humans != 3 || p.Bots != 1 {
		t.Fatalf("day 1: %+v", p)
	}
	if p := got.Series[2]; p.Humans != 0 || p.Bots != 0 {
		t.Fatalf("day 3 (no clicks): %+v", p)
	}
	if got.Uniques != 3 || len(got.Countries) != 2 || got.Countries[0] != (link.KeyCount{Key: "DE", Count: 3}) ||
		got.Countries[1] != (link.KeyCount{Key: "FR", Count: 2}) {
		t.Fatalf("humans: uniques %d, countries %v", got.Uniques, got.Countries)
	}
	q.Bots = link.BotsOnly
	if got := Summarize(st, q, from); got.Uniques != 2 || len(got.Countries) != 1 {
		t.Fatalf("bots: uniques %d, countries %v", got.Uniques, got.Countries)
	}
	q.Bots = link.BotsInclude
	if got := Summarize(st, q, from); got.Uniques != 4 || got.Countries[0] != (link.KeyCount{Key: "US", Count: 4}) {
		t.Fatalf("everyone: uniques %d, countries %v", got.Uniques, got.Countries)
	}
	if q.Bots.Count(3, 1) != 4 || link.BotsOnly.Count(3, 1) != 1 || link.BotsExclude.Count(3, 1) != 3 {
		t.Fatal("BotFilter.Count")
	}
}
