package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkraft/linkraft/internal/testkit"
)

// The abuse suite (issue 26): each attack that once worked against the
// built binary, run against it. TestIdleConnectionFloods
// (trust_process_test.go) is the connection flood.

// TestRedirectFloodStaysInBudget: browser-like redirects from many
// addresses fill the node's raw visit file to its budget (a quarter of
// -quota-bytes) and no further: the rest are shed and counted, every
// click is counted, the storage alarm stays off and creates go on. Before
// the budget, the visit file grew without a cap and, counted in the quota,
// raised the alarm that refused every create in the cluster.
func TestRedirectFloodStaysInBudget(t *testing.T) {
	t.Parallel()
	addrs := newAddrs(t)
	p := startProc(t, t.TempDir(), addrs, "-quota-bytes", "16777216", "-trusted-proxies", "127.0.0.0/8")
	st, body, _, err := call("POST", p.base+"/api/v1/links", `{"url":"https://flood.example/landing"}`)
	if err != nil || st != 201 {
		t.Fatalf("create: %d %v %v", st, body, err)
	}
	code := body["code"].(string)
	const workers, each = 8, 2500 // 20,000 redirects, bounded in count and by a minute
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pad := strings.Repeat("p", 300)
	var redirected atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			for i := range each {
				req, _ := http.NewRequestWithContext(ctx, "GET", p.base+"/"+code, nil)
				req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:130.0) Gecko/20100101 Firefox/130.0")
				// A distinct page each (a referrer's query is not kept):
				// 20,000 visits of about 400 bytes are twice the budget,
				// however they are grouped.
				req.Header.Set("Referer", fmt.Sprintf("https://news.example/%d/%d/%s", w, i, pad))
				req.Header.Set("X-Forwarded-For", fmt.Sprintf("198.51.%d.%d", w, i%250+1))
				resp, err := c.Do(req)
				if err != nil {
					return
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusFound {
					redirected.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := redirected.Load(); n != workers*each {
		t.Fatalf("%d of %d redirects answered 302", n, workers*each)
	}
	var storage map[string]any
	testkit.Eventually(t, 30*time.Second, func() error {
		_, s, _, err := call("GET", p.admin+"/admin/v1/cluster", "")
		if err != nil || s == nil {
			return fmt.Errorf("cluster status: %v", err)
		}
		storage, _ = s["storage"].(map[string]any)
		if shed, _ := storage["visits_shed"].(float64); shed == 0 {
			return fmt.Errorf("no visit shed yet: %v", storage)
		}
		return nil
	})
	if storage["alarm"] != false || storage["visit_bytes"].(float64) > storage["visit_max_bytes"].(float64) || storage["visit_max_bytes"] != float64(4<<20) {
		t.Fatalf("storage after the flood: %v", storage)
	}
	testkit.WaitFor(t, 30*time.Second, "every click counted", func() bool {
		_, s, _, err := call("GET", p.base+"/api/v1/links/"+code, "")
		return err == nil && s["clicks"] == float64(workers*each)
	})
	if st, body, _, err := call("POST", p.base+"/api/v1/links", `{"url":"https://after.example/"}`); err != nil || st != 201 {
		t.Fatalf("create after the flood: %d %v %v", st, body, err)
	}
	if !strings.Contains(p.logs(), "raw visits shed") {
		t.Fatal("shedding not logged")
	}
}

// TestAbusedRoutesKeepTheirSecretsAndCosts: a one-time link's destination
// is not shown to HEAD or to a bot and no visit is used; a key limited to
// 1 request a second cannot hash passwords by bulk updates whose filter
// matches nothing (it ran 28.6 argon2id hashes a second with no 429); a
// bulk over the bucket is refused once with the size that fits.
func TestAbusedRoutesKeepTheirSecretsAndCosts(t *testing.T) {
	t.Parallel()
	addrs := newAddrs(t)
	p := startProc(t, t.TempDir(), addrs)
	st, body, _, err := call("POST", p.base+"/api/v1/links", `{"url":"https://secret.example/one-time-token","max_visits":1}`)
	if err != nil || st != 201 {
		t.Fatalf("create: %d %v %v", st, body, err)
	}
	code := body["code"].(string)
	for _, c := range []struct{ method, ua string }{{"HEAD", "Mozilla/5.0 Firefox/130.0"}, {"GET", "Slackbot-LinkExpanding 1.0"}, {"GET", "curl/8.5.0"}} {
		req, _ := http.NewRequest(c.method, p.base+"/"+code, nil)
		req.Header.Set("User-Agent", c.ua)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Location") != "" {
			t.Fatalf("%s as %s: %d Location %q", c.method, c.ua, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if s := visit(t, "GET", p.base+"/"+code, "Mozilla/5.0 (X11; Linux x86_64; rv:130.0) Gecko/20100101 Firefox/130.0", "", false); s != 302 {
		t.Fatalf("the one visit: %d", s)
	}

	st, body, _, err = call("POST", p.base+"/api/v1/keys", `{"name":"slow","owner":"mallory","scopes":["links:read","links:write"],"rate_limit":1}`)
	if err != nil || st != 201 {
		t.Fatalf("key: %d %v %v", st, body, err)
	}
	slow := body["key"].(string)
	send := func(path, payload string) int {
		req, _ := http.NewRequest("POST", p.base+path, strings.NewReader(payload))
		req.Header.Set("Authorization", "Bearer "+slow)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	statuses := map[int]int{}
	for range 10 {
		statuses[send("/api/v1/links/bulk-update", `{"filter":{"tag":"none-has-it"},"patch":{"password":"a long enough password"}}`)]++
	}
	if statuses[429] < 6 {
		t.Fatalf("ten bulk updates matching nothing, with a password, at 1/s: %v", statuses)
	}
	var links []string
	for i := range 3 {
		links = append(links, fmt.Sprintf(`{"url":"https://bulk.example/%d"}`, i))
	}
	if s := send("/api/v1/links/bulk", `{"links":[`+strings.Join(links, ",")+`]}`); s != http.StatusRequestEntityTooLarge {
		t.Fatalf("a bulk of 3 for a bucket of 2: %d", s)
	}
}

// TestDamagedStateFileIsNamedAtStart: a shard's state file damaged while
// the node is down (its meta pages sound, its tree not) stops the start
// with the file and the repair command, not a panic of bbolt's freelist
// goroutine.
func TestDamagedStateFileIsNamedAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addrs := newAddrs(t)
	p := startProc(t, dir, addrs)
	for i := range 300 {
		if st, _, _, err := call("POST", p.base+"/api/v1/links", fmt.Sprintf(`{"url":"https://damage.example/%d/%s"}`, i, strings.Repeat("x", 300))); err != nil || st != 201 {
			t.Fatalf("create %d: %d %v", i, st, err)
		}
	}
	p.kill(t)
	// The biggest shard state file.
	var state string
	var size int64
	files, _ := filepath.Glob(filepath.Join(dir, "shards", "*", "state.db"))
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && fi.Size() > size {
			state, size = f, fi.Size()
		}
	}
	if state == "" {
		t.Fatal("no shard state file")
	}
	if err := testkit.DamageBoltPages(state); err != nil {
		t.Fatal(err)
	}
	again := launchProc(t, dir, addrs)
	select {
	case <-again.exited:
	case <-time.After(time.Minute):
		t.Fatal("a node with a damaged state file is still running")
	}
	logs := again.logs()
	shard := filepath.Base(filepath.Dir(state))
	for _, want := range []string{state, "linknode repair-shard -data-dir " + dir + " " + shard} {
		if !strings.Contains(logs, want) {
			t.Fatalf("the start's failure does not name %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "panic:") || strings.Contains(logs, "goroutine ") {
		t.Fatalf("the start panicked:\n%s", logs)
	}
}
