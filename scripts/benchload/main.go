// Command benchload fills a linknode cluster with links for the benchmarks:
// -n creates through the public API, spread over the -targets with -clients
// keep-alive connections, and writes "code url" lines to -out (the file the
// peers of scripts/bench.sh are loaded from and wrk draws codes from).
//
//	go run ./scripts/benchload -targets http://127.0.0.1:18480 -n 100000 -out codes.txt
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

func main() {
	targets := flag.String("targets", "http://127.0.0.1:18480", "comma-separated node base URLs")
	n := flag.Int("n", 100000, "links to create")
	clients := flag.Int("clients", 64, "concurrent clients")
	out := flag.String("out", "codes.txt", `file of "code url" lines`)
	timeout := flag.Duration("timeout", 30*time.Minute, "give up after this long")
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
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(*n) {
					return
				}
				// About 60 bytes, the size the disk-per-link target assumes.
				url := fmt.Sprintf("https://www.example.com/articles/2026/11/some-article-%08d", i)
				code, err := create(ctx, client, base, url)
				if err != nil {
					failed.Add(1)
					log.Printf("create %d: %v", i, err)
					continue
				}
				wmu.Lock()
				fmt.Fprintf(w, "%s %s\n", code, url)
				wmu.Unlock()
				if d := done.Add(1); d%100000 == 0 {
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
