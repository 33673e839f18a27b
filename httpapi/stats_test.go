package httpapi_test

import (
	"net/url"
	"testing"
	"time"

	"github.com/linkraft/linkraft/link"
)

// TestStatsIntervalFollowsTheRange: without interval, a range of up to 7
// days is hourly and a longer one (the default 30 days) daily; an interval
// that is asked for is kept.
func TestStatsIntervalFollowsTheRange(t *testing.T) {
	t.Parallel()
	tn := startFake(t, link.URLPolicy{}, nil)
	tn.create(t, `{"url":"https://example.com/s","alias":"stat-me"}`)
	to := time.Now().UTC().Truncate(24 * time.Hour)
	at := func(d time.Duration) string { return url.QueryEscape(to.Add(-d).Format(time.RFC3339)) }
	end := url.QueryEscape(to.Format(time.RFC3339))
	for _, c := range []struct {
		query    string
		interval string
		points   int
	}{
		{"", "day", 30},
		{"?from=" + at(7*24*time.Hour) + "&to=" + end, "hour", 168},
		{"?from=" + at(8*24*time.Hour) + "&to=" + end, "day", 8},
		{"?from=" + at(48*time.Hour) + "&to=" + end, "hour", 48},
		{"?interval=hour", "hour", 720},
		{"?interval=day&from=" + at(48*time.Hour) + "&to=" + end, "day", 2},
	} {
		r := tn.do(t, "GET", "/api/v1/links/stat-me/stats"+c.query, "", nil)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", c.query, r.status, r.body)
		}
		m := r.json(t)
		series, _ := m["series"].([]any)
		// The default range ends now, so its first point may be a
		// partial day or hour: one more.
		if m["interval"] != c.interval || (len(series) != c.points && len(series) != c.points+1) {
			t.Errorf("%q: interval %v, %d points; want %s, %d", c.query, m["interval"], len(series), c.interval, c.points)
		}
	}
}
