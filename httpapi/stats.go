package httpapi

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/link"
)

// statsJSON is GET /api/v1/links/{code}/stats. total, humans and bots count
// the clicks in [from, to); series buckets the selected audience by hour or
// day (UTC); uniques and the breakdowns cover the link's whole life (the
// replicated aggregates are not time-bucketed), which breakdowns_since says.
type statsJSON struct {
	Code            string          `json:"code"`
	From            time.Time       `json:"from"`
	To              time.Time       `json:"to"`
	Interval        string          `json:"interval"`
	BotsMode        string          `json:"bots_mode"`
	Total           uint64          `json:"total"`
	Humans          uint64          `json:"humans"`
	Bots            uint64          `json:"bots"`
	Uniques         uint64          `json:"uniques"`
	Series          []pointJSON     `json:"series"`
	Countries       []link.KeyCount `json:"countries"`
	Devices         []link.KeyCount `json:"devices"`
	Browsers        []link.KeyCount `json:"browsers"`
	OS              []link.KeyCount `json:"os"`
	Referrers       []link.KeyCount `json:"referrers"`
	BreakdownsSince time.Time       `json:"breakdowns_since"`
}

type pointJSON struct {
	Time   time.Time `json:"t"`
	Count  uint64    `json:"count"`
	Humans uint64    `json:"humans"`
	Bots   uint64    `json:"bots"`
}

// maxSeriesPoints bounds a stats answer's series.
const maxSeriesPoints = 10000

// maxHourlyDefault is the longest range whose series is hourly when the
// request names no interval.
const maxHourlyDefault = 7 * 24 * time.Hour

func (s *Server) registerStatsRoutes() {
	s.router.HandleFunc("/api/v1/links/{code}/stats", s.measured("/api/v1/links/{code}/stats", s.authed(apikey.StatsRead, 1, false, s.handleStats))).Methods(http.MethodGet, http.MethodHead)
	s.router.HandleFunc("/api/v1/links/{code}/visits", s.measured("/api/v1/links/{code}/visits", s.authed(apikey.StatsRead, 1, false, s.handleVisits))).Methods(http.MethodGet, http.MethodHead)
	// Orphan visits are requests for codes nobody owns: admin only.
	s.router.HandleFunc("/api/v1/orphan-visits", s.measured("/api/v1/orphan-visits", s.authed(apikey.Admin, 1, false, s.handleOrphans))).Methods(http.MethodGet, http.MethodHead)
}

// handleVisits serves GET /api/v1/links/{code}/visits?from=&to=&limit=:
// raw visits (anonymised) gathered from every node, newest first. partial
// says some node did not answer in time.
func (s *Server) handleVisits(w http.ResponseWriter, r *http.Request) {
	code, err := codeVar(r)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	q := r.URL.Query()
	from, to, err := s.timeRange(q, 0)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 1000 {
			s.Error(w, r, field("limit", "must be 1 to 1000", link.ErrInvalidInput))
			return
		}
	}
	// One lookup: an unknown code is 404, and so is another owner's.
	l, err := s.links.Resolve(r.Context(), code)
	if err == nil && !principalOf(r).owns(l.Owner) {
		err = link.ErrNotFound
	}
	if err != nil {
		s.Error(w, r, err)
		return
	}
	visits, g, err := s.analytics.Visits(r.Context(), code, from, to, limit)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, map[string]any{"code": code, "visits": visits, "partial": g.Partial, "missing_nodes": orEmpty(g.Missing)})
}

// handleOrphans serves GET /api/v1/orphan-visits?top=N: requests for codes
// that do not exist, summed over the nodes (each keeps its counts across
// restarts).
func (s *Server) handleOrphans(w http.ResponseWriter, r *http.Request) {
	top := 20
	if v := r.URL.Query().Get("top"); v != "" {
		var err error
		if top, err = strconv.Atoi(v); err != nil || top < 1 || top > 1000 {
			s.Error(w, r, field("top", "must be 1 to 1000", link.ErrInvalidInput))
			return
		}
	}
	o, g := s.analytics.Orphans(r.Context(), top)
	writeJSON(w, r, http.StatusOK, map[string]any{"total": o.Total, "top": o.Top, "partial": g.Partial, "missing_nodes": orEmpty(g.Missing)})
}

// handleStats serves GET /api/v1/links/{code}/stats?from=&to=&interval=
// hour|day&bots=exclude|include|only&top=N. Without interval the series
// is hourly for a range of up to 7 days and daily beyond.
func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) {
	code, err := codeVar(r)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	q := r.URL.Query()
	from, to, err := s.timeRange(q, 30*24*time.Hour)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	interval := q.Get("interval")
	step := time.Hour
	switch interval {
	case "":
		// Hours up to a week (at most 168 points), days beyond: the
		// default 30 days is 30 points, not 720 mostly empty ones.
		interval = "hour"
		if to.Sub(from) > maxHourlyDefault {
			interval, step = "day", 24*time.Hour
		}
	case "hour":
	case "day":
		step = 24 * time.Hour
	default:
		s.Error(w, r, field("interval", "must be hour or day", link.ErrInvalidInput))
		return
	}
	from, to = from.UTC().Truncate(step), to.UTC()
	if to.Sub(from)/step > maxSeriesPoints {
		s.Error(w, r, field("from", "the range has more than "+strconv.Itoa(maxSeriesPoints)+" intervals; narrow it or use interval=day", link.ErrInvalidInput))
		return
	}
	bots := link.BotFilter(q.Get("bots"))
	switch bots {
	case "":
		bots = link.BotsExclude
	case link.BotsExclude, link.BotsInclude, link.BotsOnly:
	default:
		s.Error(w, r, field("bots", "must be exclude, include or only", link.ErrInvalidInput))
		return
	}
	top := 10
	if v := q.Get("top"); v != "" {
		if top, err = strconv.Atoi(v); err != nil || top < 1 || top > 100 {
			s.Error(w, r, field("top", "must be 1 to 100", link.ErrInvalidInput))
			return
		}
	}
	// One lookup: the stats come with their link, so an unknown code is
	// 404, and so is another owner's.
	l, st, err := s.analytics.Stats(r.Context(), code, link.StatsQuery{From: from, To: to, Step: step, Bots: bots, Top: top})
	if err == nil && !principalOf(r).owns(l.Owner) {
		err = link.ErrNotFound
	}
	if err != nil {
		s.Error(w, r, err)
		return
	}
	out := statsJSON{Code: code, From: from, To: to, Interval: interval, BotsMode: string(bots),
		Humans: st.Humans, Bots: st.Bots, Total: bots.Count(st.Humans, st.Bots), Uniques: st.Uniques,
		Series: make([]pointJSON, len(st.Series)), BreakdownsSince: st.Since,
		Countries: orEmpty(st.Countries), Devices: orEmpty(st.Devices), Browsers: orEmpty(st.Browsers), OS: orEmpty(st.OS),
		Referrers: orEmpty(st.Referrers)}
	for i, p := range st.Series {
		out.Series[i] = pointJSON{Time: p.Time, Humans: p.Humans, Bots: p.Bots, Count: bots.Count(p.Humans, p.Bots)}
	}
	writeJSON(w, r, http.StatusOK, out)
}

// timeRange reads from and to (RFC 3339). to defaults to now; from to
// span before to, or the epoch when span is 0. from must come first.
func (s *Server) timeRange(q url.Values, span time.Duration) (from, to time.Time, err error) {
	to = s.now().UTC()
	if v := q.Get("to"); v != "" {
		if to, err = time.Parse(time.RFC3339, v); err != nil {
			return from, to, field("to", "must be an RFC 3339 time", link.ErrInvalidInput)
		}
	}
	from = time.Unix(0, 0).UTC()
	if span > 0 {
		from = to.Add(-span)
	}
	if v := q.Get("from"); v != "" {
		if from, err = time.Parse(time.RFC3339, v); err != nil {
			return from, to, field("from", "must be an RFC 3339 time", link.ErrInvalidInput)
		}
	}
	if !from.Before(to) {
		return from, to, field("from", "must be before to", link.ErrInvalidInput)
	}
	return from, to, nil
}

// orEmpty is s, or an empty list for nil (JSON [] rather than null).
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
