package jepsen

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/linkraft/linkraft/jepsen/checker"
	"github.com/linkraft/linkraft/jepsen/history"
)

// counterCodes is how many links the counter workload clicks.
const counterCodes = 4

// humanUA is the browser the counter workload's clicks claim to be (bots
// are counted apart, and link JSON's clicks counts humans).
const humanUA = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"

// click is GET /{code} as a browser: a redirect means the node served (and
// recorded) the click; a refused connection means it did not; anything
// else may or may not have been recorded.
func (c *client) click(ctx context.Context, base, code string) result {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/"+url.PathEscape(code), nil)
	if err != nil {
		return indeterminate(0, err, nil)
	}
	req.Header.Set("User-Agent", humanUA)
	resp, err := c.http.Do(req)
	if err != nil {
		return indeterminate(0, err, nil)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusFound {
		return result{typ: history.OK, op: history.Op{Status: resp.StatusCode}}
	}
	if resp.StatusCode == http.StatusNotFound {
		return result{typ: history.Fail, op: history.Op{Status: resp.StatusCode}}
	}
	return indeterminate(resp.StatusCode, nil, nil)
}

// clicks reads a link's click counter (GET /api/v1/links/{code}: clicks).
func (c *client) clicks(ctx context.Context, base, code string) result {
	resp, b, err := c.do(ctx, http.MethodGet, base+"/api/v1/links/"+url.PathEscape(code), nil)
	if err != nil {
		return indeterminate(0, err, nil)
	}
	if resp.StatusCode != http.StatusOK {
		return indeterminate(resp.StatusCode, nil, b)
	}
	var l struct {
		Clicks uint64 `json:"clicks"`
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return indeterminate(resp.StatusCode, err, nil)
	}
	return result{typ: history.OK, op: history.Op{Value: strconv.FormatUint(l.Clicks, 10), Status: resp.StatusCode}}
}

// counterKeys creates the workload's links before the clock starts.
func counterKeys(ctx context.Context, e *runEnv) ([]string, error) {
	var keys []string
	for i := range counterCodes {
		code := fmt.Sprintf("%sc%d", e.aliasTag, i)
		deadline := time.Now().Add(30 * time.Second)
		for {
			n := e.nodes[i%len(e.nodes)]
			r := e.cl.create(ctx, n.HTTP(), e.urlPrefix+"counter/"+code, code)
			if r.typ == history.OK || (r.typ == history.Fail && r.op.Status == http.StatusConflict) {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return nil, fmt.Errorf("counter workload: cannot create %s: %+v", code, r)
			}
			time.Sleep(100 * time.Millisecond)
		}
		keys = append(keys, code)
	}
	return keys, nil
}

// counterWorker clicks (nine times in ten) and reads the counter.
func counterWorker(ctx context.Context, w *worker, keys []string) {
	cl := w.env.cl
	for w.pace(ctx) {
		n, key := w.node(), keys[w.rng.IntN(len(keys))]
		if w.rng.IntN(10) == 0 {
			w.exec(checker.FRead, n, key, "", func() result { return cl.clicks(ctx, n.HTTP(), key) })
		} else {
			w.exec(checker.FClick, n, key, "", func() result { return cl.click(ctx, n.HTTP(), key) })
		}
	}
}

// finalCounters waits until every node reports the same count for every
// counter code twice in a row (the last batches are in), then returns what
// each node reports. It polls for at most limit.
func finalCounters(ctx context.Context, cl *client, d *db, keys []string, limit time.Duration) map[string]map[string]uint64 {
	read := func() map[string]map[string]uint64 {
		out := map[string]map[string]uint64{}
		for _, n := range d.nodes {
			out[n.id] = map[string]uint64{} // before any reader starts
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, n := range d.nodes {
			for _, k := range keys {
				wg.Go(func() {
					r := cl.clicks(ctx, n.HTTP(), k)
					if r.typ != history.OK {
						return
					}
					v, _ := strconv.ParseUint(r.op.Value, 10, 64)
					mu.Lock()
					out[n.id][k] = v
					mu.Unlock()
				})
			}
		}
		wg.Wait()
		return out
	}
	same := func(a, b map[string]map[string]uint64) bool {
		var first map[string]uint64
		for _, n := range d.nodes {
			if len(a[n.id]) != len(keys) || len(b[n.id]) != len(keys) {
				return false
			}
			for _, k := range keys {
				if a[n.id][k] != b[n.id][k] {
					return false
				}
			}
			if first != nil {
				for _, k := range keys {
					if first[k] != a[n.id][k] {
						return false
					}
				}
			}
			first = a[n.id]
		}
		return true
	}
	counts, _ := settle(ctx, time.Second, limit, read, same)
	return counts
}

// settle calls read every interval until two readings in a row are the
// same (by same) or limit has passed, and returns the last reading and
// whether it settled.
func settle[T any](ctx context.Context, interval, limit time.Duration, read func() T, same func(prev, cur T) bool) (T, bool) {
	deadline := time.Now().Add(limit)
	prev := read()
	for {
		select {
		case <-ctx.Done():
			return prev, false
		case <-time.After(interval):
		}
		cur := read()
		if same(prev, cur) {
			return cur, true
		}
		if time.Now().After(deadline) {
			return cur, false
		}
		prev = cur
	}
}
