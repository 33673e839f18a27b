package webui

import (
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// statsRanges are the range picker's choices: how far back, and the
// series' step.
var statsRanges = []struct {
	Name, Label, Interval string
	Back                  time.Duration
}{
	{"24h", "24 hours", "hour", 24 * time.Hour},
	{"7d", "7 days", "hour", 7 * 24 * time.Hour},
	{"30d", "30 days", "day", 30 * 24 * time.Hour},
	{"90d", "90 days", "day", 90 * 24 * time.Hour},
}

type keyCount struct {
	Key   string `json:"key"`
	Count uint64 `json:"count"`
}

type statsAnswer struct {
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	Interval string    `json:"interval"`
	Total    uint64    `json:"total"`
	Humans   uint64    `json:"humans"`
	Bots     uint64    `json:"bots"`
	Uniques  uint64    `json:"uniques"`
	Series   []struct {
		T      time.Time `json:"t"`
		Humans uint64    `json:"humans"`
		Bots   uint64    `json:"bots"`
	} `json:"series"`
	Countries []keyCount `json:"countries"`
	Devices   []keyCount `json:"devices"`
	Browsers  []keyCount `json:"browsers"`
	OS        []keyCount `json:"os"`
	Referrers []keyCount `json:"referrers"`
}

// breakdown is one table of the stats page.
type breakdown struct {
	Name string
	Rows []keyCount
	Max  uint64
}

type statsData struct {
	Link   linkView
	Range  string
	Ranges any
	Stats  statsAnswer
	Tables []breakdown
	// Series is the chart's data for the page's script, as JSON in an
	// attribute: unix seconds, human and bot clicks.
	Series string
}

// statsPage serves GET /ui/links/{code}/stats?range=24h|7d|30d|90d: the
// clicks over time (humans and bots), uniques and the breakdowns, drawn
// by uPlot and listed in tables that need no script.
func (u *UI) statsPage(w http.ResponseWriter, r *http.Request) {
	code, ok := u.code(w, r)
	if !ok {
		return
	}
	d := &statsData{Range: r.URL.Query().Get("range"), Ranges: statsRanges}
	rg := statsRanges[1]
	for _, x := range statsRanges {
		if x.Name == d.Range {
			rg = x
		}
	}
	d.Range = rg.Name
	if err := call(u.api, r, http.MethodGet, "/api/v1/links/"+url.PathEscape(code), nil, &d.Link); err != nil {
		u.apiFailed(w, r, err)
		return
	}
	to := u.now().UTC().Truncate(time.Hour).Add(time.Hour)
	if rg.Interval == "day" {
		to = u.now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	}
	q := url.Values{"from": {to.Add(-rg.Back).Format(time.RFC3339)}, "to": {to.Format(time.RFC3339)},
		"interval": {rg.Interval}, "bots": {"include"}, "top": {"10"}}
	if err := call(u.api, r, http.MethodGet, "/api/v1/links/"+url.PathEscape(code)+"/stats?"+q.Encode(), nil, &d.Stats); err != nil {
		u.apiFailed(w, r, err)
		return
	}
	series := struct {
		T      []int64  `json:"t"`
		Humans []uint64 `json:"humans"`
		Bots   []uint64 `json:"bots"`
	}{T: []int64{}, Humans: []uint64{}, Bots: []uint64{}}
	for _, p := range d.Stats.Series {
		series.T = append(series.T, p.T.Unix())
		series.Humans = append(series.Humans, p.Humans)
		series.Bots = append(series.Bots, p.Bots)
	}
	b, err := json.Marshal(series)
	if err != nil {
		u.apiFailed(w, r, err)
		return
	}
	d.Series = string(b)
	for _, t := range []breakdown{{Name: "Countries", Rows: d.Stats.Countries}, {Name: "Devices", Rows: d.Stats.Devices},
		{Name: "Browsers", Rows: d.Stats.Browsers}, {Name: "Systems", Rows: d.Stats.OS}, {Name: "Referrers", Rows: d.Stats.Referrers}} {
		for _, row := range t.Rows {
			t.Max = max(t.Max, row.Count)
		}
		d.Tables = append(d.Tables, t)
	}
	u.render(w, r, http.StatusOK, "stats", view{Title: "Numbers of " + code, Nav: "links", Data: d})
}
