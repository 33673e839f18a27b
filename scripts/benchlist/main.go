// Command benchlist measures GET /api/v1/links against running nodes: for
// each kind of page (the newest links, one owner's, a page deep in the
// index, a walk of consecutive pages by cursor, the most clicked of every
// owner and of one) it sends -n requests from
// -clients concurrent clients, spread over -targets, and prints a markdown
// row per kind with p50, p99 and the slowest (after one uncounted page per
// client and target, which opens the connections). Bounded: -n requests a kind,
// and every request times out after 10 s.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type page struct {
	Links []struct {
		Code      string    `json:"code"`
		CreatedAt time.Time `json:"created_at"`
		Owner     string    `json:"owner"`
	} `json:"links"`
	NextCursor *string `json:"next_cursor"`
}

func main() {
	targets := flag.String("targets", "http://127.0.0.1:18480", "comma-separated node base URLs")
	key := flag.String("key", os.Getenv("LINKRAFT_KEY"), "API key (default $LINKRAFT_KEY)")
	n := flag.Int("n", 400, "requests per kind of page")
	clients := flag.Int("clients", 4, "concurrent clients")
	label := flag.String("label", "", "the table's first column")
	flag.Parse()
	bases := strings.Split(*targets, ",")
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(base, query string) (page, time.Duration, error) {
		req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/links?"+query, nil)
		req.Header.Set("Authorization", "Bearer "+*key)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return page{}, 0, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		d := time.Since(start)
		if err != nil {
			return page{}, d, err
		}
		if resp.StatusCode != http.StatusOK {
			return page{}, d, fmt.Errorf("%s: %d %.200s", query, resp.StatusCode, b)
		}
		var p page
		err = json.Unmarshal(b, &p)
		return p, d, err
	}
	// The span of creation times and an owner, from the two ends.
	newest, _, err := get(bases[0], "limit=1")
	if err != nil || len(newest.Links) == 0 {
		fail("newest link: %v", err)
	}
	oldest, _, err := get(bases[0], "limit=1&sort=created")
	if err != nil || len(oldest.Links) == 0 {
		fail("oldest link: %v", err)
	}
	lo, hi := oldest.Links[0].CreatedAt, newest.Links[0].CreatedAt
	owner := newest.Links[0].Owner
	// Warm-up, not counted: every client opens its connection to every
	// target (and the nodes theirs to each other) before the first kind.
	var warm sync.WaitGroup
	for range *clients {
		for _, base := range bases {
			warm.Go(func() { _, _, _ = get(base, "limit=100") })
		}
	}
	warm.Wait()
	kinds := []struct {
		name  string
		query func(r *rand.Rand) string
		walk  bool
	}{
		{"newest 100 (every owner)", func(*rand.Rand) string { return "limit=100" }, false},
		{"newest 100 of one owner", func(*rand.Rand) string { return "limit=100&owner=" + url.QueryEscape(owner) }, false},
		{"100 at a random depth", func(r *rand.Rand) string {
			t := lo.Add(time.Duration(r.Int64N(int64(hi.Sub(lo)) + 1)))
			return "limit=100&created_before=" + url.QueryEscape(t.Format(time.RFC3339Nano))
		}, false},
		{"the next page by cursor (walks of 10)", nil, true},
		{"the 100 most clicked (every owner)", func(*rand.Rand) string { return "limit=100&sort=-clicks" }, false},
		{"the 100 most clicked of one owner", func(*rand.Rand) string { return "limit=100&sort=-clicks&owner=" + url.QueryEscape(owner) }, false},
	}
	for _, k := range kinds {
		measure(k.name, k.query, k.walk, bases, *clients, *n, *label, get)
	}
}

// measure sends n requests of one kind of page from clients concurrent
// clients spread over bases (a walk follows cursors ten pages at a time)
// and prints its markdown row.
func measure(name string, query func(r *rand.Rand) string, walk bool, bases []string, clients, n int, label string,
	get func(base, query string) (page, time.Duration, error)) {
	var (
		mu     sync.Mutex
		lat    []time.Duration
		errs   atomic.Int64
		next   atomic.Int64
		wg     sync.WaitGroup
		failed string
	)
	for c := range clients {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(c), 7))
			cursor := ""
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				base := bases[int(i)%len(bases)]
				q := ""
				if walk {
					if cursor == "" || i%10 == 0 {
						cursor = ""
						q = "limit=100"
					} else {
						q = "limit=100&cursor=" + url.QueryEscape(cursor)
					}
				} else {
					q = query(r)
				}
				p, d, err := get(base, q)
				if err != nil {
					errs.Add(1)
					mu.Lock()
					failed = err.Error()
					mu.Unlock()
					continue
				}
				if walk && p.NextCursor != nil {
					cursor = *p.NextCursor
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(lat)
	pct := func(p float64) string {
		if len(lat) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f ms", float64(lat[min(len(lat)-1, int(p*float64(len(lat))))])/1e6)
	}
	fmt.Printf("| %s | %s | %d | %s | %s | %s | %d |\n", label, name, len(lat), pct(0.5), pct(0.99), pct(1), errs.Load())
	if failed != "" {
		fmt.Fprintln(os.Stderr, "last error:", failed)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "benchlist: "+format+"\n", args...)
	os.Exit(1)
}
