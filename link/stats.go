package link

import "time"

// BotFilter says whose clicks a stats answer counts.
type BotFilter string

// The bot filters of the stats API (?bots=).
const (
	BotsExclude BotFilter = "exclude" // humans only (the default)
	BotsInclude BotFilter = "include" // humans and bots
	BotsOnly    BotFilter = "only"    // bots only
)

// Count is what f counts of a period's humans and bots.
func (f BotFilter) Count(humans, bots uint64) uint64 {
	switch f {
	case BotsOnly:
		return bots
	case BotsInclude:
		return humans + bots
	}
	return humans
}

// StatsQuery asks for a link's click statistics.
type StatsQuery struct {
	// From and To bound the series and the period's counts, [From, To);
	// From is a multiple of Step.
	From, To time.Time
	// Step is the series' interval: an hour or a day.
	Step time.Duration
	// Bots selects the audience of Uniques and the breakdowns.
	Bots BotFilter
	// Top bounds each breakdown.
	Top int
}

// StatsPoint is one interval of a series.
type StatsPoint struct {
	Time   time.Time
	Humans uint64
	Bots   uint64
}

// KeyCount is one entry of a breakdown (a country, a browser, ...).
type KeyCount struct {
	Key   string `json:"key"`
	Count uint64 `json:"count"`
}

// Stats are a link's click statistics, finished for display. Humans, Bots
// and Series cover the query's period; Uniques and the breakdowns the
// link's whole life (the replicated aggregates are not time-bucketed),
// that is since Since.
type Stats struct {
	Humans, Bots uint64
	// Series has one point per Step in [From, To), zeros included.
	Series []StatsPoint
	// Uniques estimates the distinct visitors of the selected audience
	// (HyperLogLog, about 1% error).
	Uniques                                     uint64
	Countries, Devices, Browsers, OS, Referrers []KeyCount
	// Since is the link's creation.
	Since time.Time
}
