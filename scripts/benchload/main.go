// Command benchload fills a linknode cluster with links for the benchmarks:
// -n creates through the public API, spread over the -targets with -clients
// keep-alive connections, and writes "code url" lines to -out (the file the
// peers of scripts/bench.sh are loaded from and wrk draws codes from).
//
//	go run ./scripts/benchload -targets http://127.0.0.1:18480 -n 100000 -out codes.txt [-bulk 1000]
//
// Bounded: it stops after -n creates or -timeout, whichever comes first.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// apiKey is the key every request sends.
var apiKey string

func main() {
	targets := flag.String("targets", "http://127.0.0.1:18480", "comma-separated node base URLs")
	n := flag.Int("n", 100000, "links to create")
	clients := flag.Int("clients", 64, "concurrent clients")
	out := flag.String("out", "codes.txt", `file of "code url" lines`)
	timeout := flag.Duration("timeout", 30*time.Minute, "give up after this long")
	bulk := flag.Int("bulk", 0, "links per POST /api/v1/links/bulk (0: one POST /api/v1/links per link)")
	flag.StringVar(&apiKey, "key", os.Getenv("LINKRAFT_KEY"), "API key sent as Authorization: Bearer (default $LINKRAFT_KEY)")
	flag.Parse()
	bases := strings.Split(*targets, ",")

	f, err := os.Create(*out)
	if err != nil {
		log.Fatal(err)
	}
	w := bufio.NewWriter(f)
	var wmu sync.Mutex
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: *clients, MaxConnsPerHost: *clients}}

	var next, done, failed atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for c := range *clients {
		wg.Go(func() {
			base := bases[c%len(bases)]
			per := int64(max(*bulk, 1))
			for ctx.Err() == nil {
				first := next.Add(per) - per
				if first >= int64(*n) {
					return
				}
				var urls []string
				for i := first; i < min(first+per, int64(*n)); i++ {
					// About 60 bytes, the size the disk-per-link target assumes.
					urls = append(urls, fmt.Sprintf("https://www.example.com/articles/2026/11/some-article-%08d", i))
				}
				var codes []string
				var err error
				if *bulk > 0 {
					codes, err = createBulk(ctx, client, base, urls)
				} else {
					var code string
					code, err = create(ctx, client, base, urls[0])
					codes = []string{code}
				}
				if err != nil {
					failed.Add(int64(len(urls)))
					log.Printf("create %d..%d: %v", first, first+int64(len(urls))-1, err)
					continue
				}
				wmu.Lock()
				for k, code := range codes {
					fmt.Fprintf(w, "%s %s\n", code, urls[k])
				}
				wmu.Unlock()
				d := done.Add(int64(len(codes)))
				if d/100000 != (d-int64(len(codes)))/100000 {
					log.Printf("%d links, %.0f/s", d, float64(d)/time.Since(start).Seconds())
				}
			}
		})
	}
	wg.Wait()
	if err := w.Flush(); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
	el := time.Since(start)
	log.Printf("created %d links in %s (%.0f/s), %d failed", done.Load(), el.Round(time.Millisecond), float64(done.Load())/el.Seconds(), failed.Load())
	if failed.Load() > 0 || done.Load() < int64(*n) {
		os.Exit(1)
	}
}

func create(ctx context.Context, client *http.Client, base, url string) (string, error) {
	body, _ := json.Marshal(map[string]string{"url": url})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/links", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var l struct{ Code string }
	if err := json.Unmarshal(b, &l); err != nil || l.Code == "" {
		return "", fmt.Errorf("bad answer %q", b)
	}
	return l.Code, nil
}

// createBulk makes urls through the bulk endpoint and returns their codes in
// order; any link that failed fails the call.
func createBulk(ctx context.Context, client *http.Client, base string, urls []string) ([]string, error) {
	type item struct {
		URL string `json:"url"`
	}
	body := struct {
		Links []item `json:"links"`
	}{}
	for _, u := range urls {
		body.Links = append(body.Links, item{URL: u})
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/links/bulk", bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if b, err = io.ReadAll(resp.Body); err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var out struct {
		Results []struct {
			Status int
			Link   struct{ Code string }
		}
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Results) != len(urls) {
		return nil, fmt.Errorf("bad answer (%v): %.200s", err, b)
	}
	codes := make([]string, len(urls))
	for i, r := range out.Results {
		if r.Status != http.StatusCreated || r.Link.Code == "" {
			return nil, fmt.Errorf("link %d: status %d", i, r.Status)
		}
		codes[i] = r.Link.Code
	}
	return codes, nil
}
