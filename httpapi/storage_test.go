package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/link"
)

// TestStorageAlarmAnswers507: over its quota (a quota the data dir is
// already over), a node answers creates with 507
// /problems/insufficient-storage, bulk creates with that problem per link,
// and stores nothing. (Reads and redirects under the alarm:
// cluster.TestStorageAlarmRefusesWritesAndClears.)
func TestStorageAlarmAnswers507(t *testing.T) {
	t.Parallel()
	over := startNode(t, link.URLPolicy{}, func(c *cluster.Config) { c.QuotaBytes = 1 })
	before := over.storedState(t)
	r := over.postJSON(t, "/api/v1/links", `{"url":"https://refused.example/"}`)
	if r.status != http.StatusInsufficientStorage || r.header.Get("Content-Type") != "application/problem+json" ||
		!strings.Contains(string(r.body), "/problems/insufficient-storage") {
		t.Fatalf("create under the alarm: %d %s %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	r = over.postJSON(t, "/api/v1/links/bulk", `{"links":[{"url":"https://refused.example/"}]}`)
	if !strings.Contains(string(r.body), "insufficient-storage") {
		t.Fatalf("bulk create under the alarm: %d %s", r.status, r.body)
	}
	if after := over.storedState(t); after != before {
		t.Fatal("a refused write changed the stored state")
	}
}
