package httpapi

import (
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/axiomhq/hyperloglog"

	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/link"
)

// statsJSON is GET /api/v1/links/{code}/stats. total, humans and bots count
// the clicks in [from, to); series buckets the selected audience by hour or
// day (UTC); uniques and the breakdowns cover the link's whole life (the
// replicated aggregates are not time-bucketed), which breakdowns_since says.
type statsJSON struct {
	Code            string      `json:"code"`
	From            time.Time   `json:"from"`
	To              time.Time   `json:"to"`
	Interval        string      `json:"interval"`
	BotsMode        string      `json:"bots_mode"`
	Total           uint64      `json:"total"`
	Humans          uint64      `json:"humans"`
	Bots            uint64      `json:"bots"`
	Uniques         uint64      `json:"uniques"`
	Series          []pointJSON `json:"series"`
	Countries       []countJSON `json:"countries"`
	Devices         []countJSON `json:"devices"`
	Browsers        []countJSON `json:"browsers"`
	OS              []countJSON `json:"os"`
	Referrers       []countJSON `json:"referrers"`
	BreakdownsSince time.Time   `json:"breakdowns_since"`
}

type pointJSON struct {
	Time   time.Time `json:"t"`
	Count  uint64    `json:"count"`
	Humans uint64    `json:"humans"`
	Bots   uint64    `json:"bots"`
}

type countJSON struct {
	Key   string `json:"key"`
	Count uint64 `json:"count"`
}

// maxSeriesPoints bounds a stats answer's series.
const maxSeriesPoints = 10000

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
	l, err := s.svc.Resolve(r.Context(), code)
	if err == nil && !principalOf(r).owns(l.Owner) {
		err = link.ErrNotFound
	}
	if err != nil {
		s.Error(w, r, err)
		return
	}
	visits, g, err := s.svc.Visits(r.Context(), code, from, to, limit)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, map[string]any{"code": code, "visits": visits, "partial": g.Partial, "missing_nodes": g.Missing})
}

// handleOrphans serves GET /api/v1/orphan-visits?top=N: requests for codes
// that do not exist, summed over the nodes since they started.
func (s *Server) handleOrphans(w http.ResponseWriter, r *http.Request) {
	top := 20
	if v := r.URL.Query().Get("top"); v != "" {
		var err error
		if top, err = strconv.Atoi(v); err != nil || top < 1 || top > 1000 {
			s.Error(w, r, field("top", "must be 1 to 1000", link.ErrInvalidInput))
			return
		}
	}
	o, g := s.svc.Orphans(r.Context(), top)
	writeJSON(w, r, http.StatusOK, map[string]any{"total": o.Total, "top": o.Top, "partial": g.Partial, "missing_nodes": g.Missing})
}

// handleStats serves GET /api/v1/links/{code}/stats?from=&to=&interval=
// hour|day&bots=exclude|include|only&top=N.
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
	case "", "hour":
		interval = "hour"
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
	mode := q.Get("bots")
	switch mode {
	case "":
		mode = "exclude"
	case "exclude", "include", "only":
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
	if err := s.checkOwner(r, code); err != nil {
		s.Error(w, r, err)
		return
	}
	st, err := s.svc.ClickStats(r.Context(), code, from, to)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	out := statsJSON{Code: code, From: from, To: to, Interval: interval, BotsMode: mode, Series: []pointJSON{}}
	// The series, and the period's totals from it.
	byStep := map[int64]*pointJSON{}
	for _, h := range st.Hours {
		t := time.Unix(int64(h.Hour)*3600, 0).UTC()
		if t.Before(from) || !t.Before(to) {
			continue
		}
		out.Humans += h.Humans
		out.Bots += h.Bots
		k := t.Truncate(step).Unix()
		p := byStep[k]
		if p == nil {
			p = &pointJSON{Time: t.Truncate(step)}
			byStep[k] = p
		}
		p.Humans += h.Humans
		p.Bots += h.Bots
	}
	for t := from; t.Before(to); t = t.Add(step) {
		p := pointJSON{Time: t}
		if got := byStep[t.Unix()]; got != nil {
			p = *got
		}
		p.Count = pick(mode, p.Humans, p.Bots)
		out.Series = append(out.Series, p)
	}
	out.Total = pick(mode, out.Humans, out.Bots)
	// Life-long breakdowns and uniques of the selected audience.
	var c fsm.Counts
	switch mode {
	case "exclude":
		c = st.Totals.Humans
	case "only":
		c = st.Totals.Bots
	default:
		both := fsm.ClickTotals{Humans: st.Totals.Humans}
		if err := fsm.MergeTotals(&both, &fsm.ClickTotals{Humans: st.Totals.Bots}); err == nil {
			c = both.Humans
		} else {
			c = st.Totals.Humans
		}
	}
	out.Uniques = estimate(c.Visitors)
	out.Countries, out.Devices, out.Browsers = topN(c.Countries, top), topN(c.Devices, top), topN(c.Browsers, top)
	out.OS, out.Referrers = topN(c.OS, top), topN(c.Referrers, top)
	if l, err := s.svc.Get(r.Context(), code, false); err == nil {
		out.BreakdownsSince = l.CreatedAt.UTC()
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

func pick(mode string, humans, bots uint64) uint64 {
	switch mode {
	case "only":
		return bots
	case "include":
		return humans + bots
	}
	return humans
}

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

func topN(m map[string]uint64, n int) []countJSON {
	out := make([]countJSON, 0, len(m))
	for k, v := range m {
		out = append(out, countJSON{Key: k, Count: v})
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
