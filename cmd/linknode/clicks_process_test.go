package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkraft/linkraft/internal/testkit"
)

// startCluster starts size linknode processes on loopback that form one
// cluster (4 shards), with extra flags, and waits until each is ready; nil
// if one failed to start (the test has failed then).
func startCluster(t *testing.T, size int, extra ...string) []*proc {
	t.Helper()
	addrs := make([]procAddrs, size)
	var gossips []string
	for i := range addrs {
		addrs[i] = procAddrs{http: freeAddr(t), raft: freeAddr(t), gossip: freeAddr(t)}
		gossips = append(gossips, addrs[i].gossip)
	}
	procs := make([]*proc, size)
	keyFile := testKeyFile(t)
	for i := range procs {
		flags := append([]string{"-node-id", fmt.Sprintf("n%d", i+1), "-bootstrap-expect", fmt.Sprint(size),
			"-join", strings.Join(gossips, ","), "-shards", "4", "-cluster-key-file", keyFile}, extra...)
		procs[i] = launchProc(t, t.TempDir(), addrs[i], flags...)
	}
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() { p.waitReady(t) })
	}
	wg.Wait()
	if t.Failed() {
		return nil
	}
	return procs
}

func visit(tb testing.TB, method, url, ua, ref string, dnt bool) int {
	tb.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("User-Agent", ua)
	if ref != "" {
		req.Header.Set("Referer", ref)
	}
	if dnt {
		req.Header.Set("DNT", "1")
	}
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

type statsDoc struct {
	Total, Humans, Bots, Uniques uint64
	Series                       []struct{ Count uint64 }
	Devices, Referrers, Browsers []struct {
		Key   string
		Count uint64
	}
}

func getStats(tb testing.TB, base, code, query string) statsDoc {
	tb.Helper()
	req, err := http.NewRequest("GET", base+"/api/v1/links/"+code+"/stats"+query, nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testAdminKey)
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		tb.Fatalf("stats: %d", resp.StatusCode)
	}
	var d statsDoc
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		tb.Fatal(err)
	}
	return d
}

func counts(xs []struct {
	Key   string
	Count uint64
}) map[string]uint64 {
	m := map[string]uint64{}
	for _, x := range xs {
		m[x.Key] = x.Count
	}
	return m
}

// TestClickStatsAcrossThreeNodes sends a known set of visits through three
// real linknode processes — humans with five browsers, link-preview bots,
// do-not-track visitors, HEAD requests — and requires every node's stats
// to match it exactly once the batches are in.
func TestClickStatsAcrossThreeNodes(t *testing.T) {
	t.Parallel()
	const size = 3
	procs := startCluster(t, size, "-click-flush", "100ms")
	if procs == nil {
		return
	}
	if status, m, _, err := call("POST", procs[0].base+"/api/v1/links", `{"url":"https://stats.example/","alias":"stats1"}`); err != nil || status != 201 {
		t.Fatalf("create: %d %v %v", status, m, err)
	}
	link := func(i int) string { return procs[i%size].base + "/stats1" }
	var humans [5]string
	for i := range humans {
		humans[i] = fmt.Sprintf("Mozilla/5.0 (X11; Linux x86_64; rv:12%d.0) Gecko/20100101 Firefox/12%d.0", i, i)
	}
	for i := range 90 {
		if s := visit(t, "GET", link(i), humans[i%5], fmt.Sprintf("https://ref%d.example/page", i%2), false); s != 302 {
			t.Fatalf("visit %d: %d", i, s)
		}
	}
	for i := range 12 {
		visit(t, "GET", link(i), "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)", "", false)
	}
	for i := range 6 {
		visit(t, "GET", link(i), "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1", "", true)
	}
	for i := range 4 { // link checkers: not visits
		visit(t, "HEAD", link(i), humans[0], "", false)
	}

	// The batches reach the shard within a few flush intervals: poll.
	testkit.Eventually(t, 30*time.Second, func() error {
		d := getStats(t, procs[2].base, "stats1", "")
		if d.Humans > 96 || d.Bots > 12 {
			t.Fatalf("over-counted: humans %d, bots %d", d.Humans, d.Bots)
		}
		if d.Humans != 96 || d.Bots != 12 {
			return fmt.Errorf("stats at humans %d, bots %d", d.Humans, d.Bots)
		}
		return nil
	})
	for _, p := range procs {
		// Followers apply the batches a moment later than the leader.
		var d statsDoc
		testkit.WaitFor(t, 10*time.Second, p.base+" to apply the click batches", func() bool {
			d = getStats(t, p.base, "stats1", "")
			return d.Humans >= 96
		})
		if d.Total != 96 || d.Humans != 96 || d.Bots != 12 {
			t.Fatalf("%s: total %d humans %d bots %d", p.base, d.Total, d.Humans, d.Bots)
		}
		if d.Uniques != 5 {
			t.Fatalf("%s: uniques %d, want 5 (do-not-track visitors are not hashed)", p.base, d.Uniques)
		}
		ref := counts(d.Referrers)
		if ref["ref0.example"] != 45 || ref["ref1.example"] != 45 || ref["direct"] != 6 {
			t.Fatalf("%s: referrers %v", p.base, ref)
		}
		dev := counts(d.Devices)
		if dev["Desktop"] != 90 || dev["Mobile"] != 6 {
			t.Fatalf("%s: devices %v", p.base, dev)
		}
		var series uint64
		for _, pt := range d.Series {
			series += pt.Count
		}
		if series != 96 {
			t.Fatalf("%s: series sums to %d", p.base, series)
		}
		if only := getStats(t, p.base, "stats1", "?bots=only"); only.Total != 12 || only.Uniques != 1 {
			t.Fatalf("%s: bots=only %+v", p.base, only)
		}
		if all := getStats(t, p.base, "stats1", "?bots=include&interval=day"); all.Total != 108 {
			t.Fatalf("%s: bots=include total %d", p.base, all.Total)
		}
		if status, m, _, _ := call("GET", p.base+"/api/v1/links/stats1", ""); status != 200 || m["clicks"] != float64(96) {
			t.Fatalf("%s: link clicks = %v", p.base, m["clicks"])
		}
	}
	// Raw visits, gathered from the three nodes: every visit but the
	// do-not-track ones, anonymised, newest first.
	var vis struct {
		Visits []struct {
			Node, Network, Referer string
			Bot                    bool
			Time                   time.Time
		}
		Partial bool
	}
	// Raw visits are written every 5 s (a local, best-effort record): poll.
	testkit.WaitFor(t, 20*time.Second, "102 raw visits", func() bool {
		req, _ := http.NewRequest("GET", procs[1].base+"/api/v1/links/stats1/visits?limit=1000", nil)
		req.Header.Set("Authorization", "Bearer "+testAdminKey)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("visits: %d", resp.StatusCode)
		}
		vis.Visits = nil
		if err := json.NewDecoder(resp.Body).Decode(&vis); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return len(vis.Visits) >= 102
	})
	nodes, bots := map[string]int{}, 0
	for i, v := range vis.Visits {
		nodes[v.Node]++
		if v.Bot {
			bots++
		}
		if v.Network != "127.0.0.0/24" || strings.Contains(v.Referer, "?") {
			t.Fatalf("visit not anonymised: %+v", v)
		}
		if i > 0 && v.Time.After(vis.Visits[i-1].Time) {
			t.Fatal("visits not newest first")
		}
	}
	if vis.Partial || len(vis.Visits) != 102 || bots != 12 || len(nodes) != size {
		t.Fatalf("visits: %d (bots %d) from %v, partial %v; want 102 from all 3 nodes", len(vis.Visits), bots, nodes, vis.Partial)
	}
	// Unknown codes are orphan visits, summed over the nodes.
	for i := range 3 {
		visit(t, "GET", procs[i].base+"/typo-code", humans[0], "", false)
	}
	var orph struct {
		Total uint64
		Top   []struct {
			Code  string
			Count uint64
		}
		Partial bool
	}
	req, _ := http.NewRequest("GET", procs[2].base+"/api/v1/orphan-visits", nil)
	req.Header.Set("Authorization", "Bearer "+testAdminKey)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(resp.Body).Decode(&orph); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if orph.Partial || orph.Total < 3 || len(orph.Top) == 0 || orph.Top[0].Code != "typo-code" || orph.Top[0].Count != 3 {
		t.Fatalf("orphans = %+v", orph)
	}

	// Bad stats queries are problems, not 500s.
	for _, q := range []string{"stats?interval=week", "stats?bots=maybe", "stats?from=yesterday", "stats?from=2030-01-02T00:00:00Z&to=2030-01-01T00:00:00Z", "stats?top=0",
		"visits?limit=0", "visits?limit=5000", "visits?from=soon"} {
		if status, m, _, _ := call("GET", procs[0].base+"/api/v1/links/stats1/"+q, ""); status != 400 {
			t.Fatalf("%s: %d %v", q, status, m)
		}
	}
	if status, _, _, _ := call("GET", procs[0].base+"/api/v1/links/nosuchcode/stats", ""); status != 404 {
		t.Fatalf("stats of an unknown code: %d", status)
	}
}

// TestMaxVisitsExactAcrossThreeNodes: 60 clients spread over three nodes
// race for a link limited to 25 visits. Exactly 25 redirects succeed, every
// other answer is 410, and link-preview bots neither use visits up nor get
// counted as visitors.
func TestMaxVisitsExactAcrossThreeNodes(t *testing.T) {
	t.Parallel()
	const size, limit = 3, 25
	procs := startCluster(t, size)
	if procs == nil {
		return
	}
	var wg sync.WaitGroup
	body := fmt.Sprintf(`{"url":"https://limited.example/","alias":"limited","max_visits":%d}`, limit)
	if status, m, _, err := call("POST", procs[1].base+"/api/v1/links", body); err != nil || status != 201 || m["max_visits"] != float64(limit) {
		t.Fatalf("create: %d %v %v", status, m, err)
	}
	const preview = "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)"
	for i := range 10 { // previews first: they must not use anything up, nor see the destination
		if s := visit(t, "GET", procs[i%size].base+"/limited", preview, "", false); s != 200 {
			t.Fatalf("preview %d: %d", i, s)
		}
	}
	var mu sync.Mutex
	answers := map[int]int{}
	for c := range 60 {
		wg.Go(func() {
			base := procs[c%size].base
			for range 3 {
				s := visit(t, "GET", base+"/limited", "Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0", "", false)
				mu.Lock()
				answers[s]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if answers[302] != limit || answers[410] != 180-limit {
		t.Fatalf("answers %v: want exactly %d redirects and %d 410s", answers, limit, 180-limit)
	}
	// Every node now answers 410 (from its own state, once replicated), to
	// bots too.
	for _, p := range procs {
		testkit.WaitFor(t, 10*time.Second, p.base+" to answer 410 for the used-up link", func() bool {
			return visit(t, "GET", p.base+"/limited", preview, "", false) == 410
		})
	}
}
