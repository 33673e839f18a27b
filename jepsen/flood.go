package jepsen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linkraft/linkraft/jepsen/checker"
	"github.com/linkraft/linkraft/jepsen/history"
)

// The flood fault is an anonymous client on the nodes' network, from an
// address of its own (the bridge's second address, netns.Env.AttackerIP),
// while the workloads' clients go on from theirs. Until healed it:
//
//   - floods every node with redirects of one link, browser-like and
//     bot-like in turn (each writes a raw visit and a click);
//   - holds idle connections to every node's public port and peer port, as
//     many as it is let (the per-client caps refuse the rest);
//   - asks every node for 2048-pixel QR codes, and with a key of its own
//     (not an admin key: those are not limited) for listings that scan.
//
// The run stays valid only if every checker does; what the flood did to
// the workloads' clients (their error rate and p99 during the flood,
// beside the rest of the run) is in the fault's record in results.json.
// Every loop is bounded by the heal, by floodMax and by floodRequests.

const (
	floodWorkers   = 3               // redirect workers per node
	floodIdle      = 400             // idle connections tried per node and port
	floodMax       = 2 * time.Minute // the longest a flood runs, healed or not
	floodRequests  = 2_000_000       // the most requests of a flood in all
	floodUserAgent = "Mozilla/5.0 (X11; Linux x86_64; rv:130.0) Gecko/20100101 Firefox/130.0"
	floodBot       = "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"
)

type floodStats struct {
	requests, redirected, limited, refused, failed atomic.Int64
	idleHTTP, idlePeer                             atomic.Int64 // idle connections held at the heal
	renders, scans                                 atomic.Int64
}

// startFlood creates the flood's link and key, then its loops; the heal
// stops them and closes what they hold.
func (n *nemesis) startFlood(ctx context.Context) (*injection, error) {
	attacker := n.env.AttackerIP()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: attacker.AsSlice()}, Timeout: 2 * time.Second}
	hc := &http.Client{
		Transport: &http.Transport{DialContext: dialer.DialContext, MaxIdleConnsPerHost: floodWorkers + 2},
		Timeout:   5 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	code, key, err := n.floodTargets(ctx)
	if err != nil {
		return nil, err
	}
	st := &floodStats{}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), floodMax)
	var wg sync.WaitGroup
	held := map[int]*heldConns{httpPort: {}, raftPort: {}}
	for _, d := range n.db.nodes {
		for w := range floodWorkers {
			wg.Go(func() { floodRedirects(fctx, hc, st, d.HTTP()+"/"+code, w%2 == 1) })
		}
		wg.Go(func() { floodExpensive(fctx, hc, st, d.HTTP(), code, key) })
		for port, h := range held {
			wg.Go(func() { h.open(fctx, dialer, net.JoinHostPort(d.ip, strconv.Itoa(port))) })
		}
	}
	measure := func(context.Context) (string, bool, error) {
		httpOpen, httpGone := held[httpPort].probe()
		peerOpen, peerGone := held[raftPort].probe()
		return fmt.Sprintf("from %s: %d requests (%d redirected, %d rate-limited, %d refused, %d failed), %d 2048-pixel QR codes, %d scanning listings; idle connections held open / closed or answered by the nodes: public %d / %d, peer %d / %d",
			attacker, st.requests.Load(), st.redirected.Load(), st.limited.Load(), st.refused.Load(), st.failed.Load(),
			st.renders.Load(), st.scans.Load(), httpOpen, httpGone, peerOpen, peerGone), st.redirected.Load() > 0, nil
	}
	return &injection{
		detail:  fmt.Sprintf("redirect, idle-connection, QR and listing flood from %s on every node", attacker),
		measure: measure,
		heal: func(context.Context) error {
			cancel()
			wg.Wait()
			for _, h := range held {
				h.close()
			}
			hc.CloseIdleConnections()
			return nil
		},
	}, nil
}

// floodTargets makes (once a run) the link the flood redirects to and a
// key with links:read of an owner of its own.
func (n *nemesis) floodTargets(ctx context.Context) (code, key string, err error) {
	n.floodOnce.Do(func() {
		post := func(path, body string) (map[string]any, error) {
			var lastErr error
			for _, d := range n.db.nodes {
				rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				req, _ := http.NewRequestWithContext(rctx, http.MethodPost, d.HTTP()+path, bytes.NewReader([]byte(body)))
				req.Header.Set("Authorization", "Bearer "+n.db.adminKey)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					cancel()
					lastErr = err
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				cancel()
				if resp.StatusCode != http.StatusCreated {
					lastErr = fmt.Errorf("%s on %s: %d %s", path, d.id, resp.StatusCode, b)
					continue
				}
				var m map[string]any
				return m, json.Unmarshal(b, &m)
			}
			return nil, lastErr
		}
		l, err := post("/api/v1/links", `{"url":"https://flood.example/landing","title":"flooded"}`)
		if err != nil {
			n.floodErr = err
			return
		}
		k, err := post("/api/v1/keys", `{"name":"flooder","owner":"flooder","scopes":["links:read"]}`)
		if err != nil {
			n.floodErr = err
			return
		}
		n.floodCode, _ = l["code"].(string)
		n.floodKey, _ = k["key"].(string)
	})
	if n.floodErr != nil {
		return "", "", fmt.Errorf("%w: the flood's link or key: %w", errNoTarget, n.floodErr)
	}
	return n.floodCode, n.floodKey, nil
}

// floodRedirects asks for url until ctx ends or the flood's request bound
// is reached.
func floodRedirects(ctx context.Context, hc *http.Client, st *floodStats, url string, bot bool) {
	ua := floodUserAgent
	if bot {
		ua = floodBot
	}
	for ctx.Err() == nil && st.requests.Add(1) <= floodRequests {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("User-Agent", ua)
		floodCount(st, hc, req)
	}
}

// floodExpensive asks for 2048-pixel QR codes and scanning listings in
// turn.
func floodExpensive(ctx context.Context, hc *http.Client, st *floodStats, base, code, key string) {
	for i := 0; ctx.Err() == nil && st.requests.Add(1) <= floodRequests; i++ {
		var req *http.Request
		if i%2 == 0 {
			req, _ = http.NewRequestWithContext(ctx, http.MethodGet, base+"/"+code+"/qr?size=2048", nil)
			st.renders.Add(1)
		} else {
			req, _ = http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/links?q=no-such-text-"+strconv.Itoa(i), nil)
			req.Header.Set("Authorization", "Bearer "+key)
			st.scans.Add(1)
		}
		if floodCount(st, hc, req) == http.StatusTooManyRequests {
			// Limited: wait as told, a second at most, as a client would
			// that wants to keep costing.
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// floodCount sends req and counts its answer; it returns the status (0
// for no answer).
func floodCount(st *floodStats, hc *http.Client, req *http.Request) int {
	resp, err := hc.Do(req)
	if err != nil {
		if req.Context().Err() == nil {
			st.failed.Add(1)
		}
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch {
	case resp.StatusCode < 400:
		st.redirected.Add(1)
	case resp.StatusCode == http.StatusTooManyRequests:
		st.limited.Add(1)
	case resp.StatusCode == http.StatusServiceUnavailable:
		st.refused.Add(1)
	}
	return resp.StatusCode
}

// heldConns are the idle connections a flood holds to one port of every
// node.
type heldConns struct {
	mu    sync.Mutex
	conns []net.Conn
}

// open opens up to floodIdle connections to addr that send nothing.
func (h *heldConns) open(ctx context.Context, dialer *net.Dialer, addr string) {
	for range floodIdle {
		c, err := dialer.DialContext(ctx, "tcp", addr)
		if ctx.Err() != nil {
			if err == nil {
				_ = c.Close()
			}
			return
		}
		if err != nil {
			continue
		}
		h.mu.Lock()
		h.conns = append(h.conns, c)
		h.mu.Unlock()
	}
}

// probe counts the connections the nodes still hold open (a read times
// out) and those they closed or answered (a refusal's 429).
func (h *heldConns) probe() (open, gone int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b [1]byte
	for _, c := range h.conns {
		_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
		_, err := c.Read(b[:])
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			open++
		} else {
			gone++
		}
	}
	return open, gone
}

// close closes every connection.
func (h *heldConns) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		_ = c.Close()
	}
	h.conns = nil
}

// legitDuring sums up what the workloads' clients saw while each flood was
// in force, beside the rest of the run, into its fault record.
func legitDuring(records []checker.FaultRecord, ops []history.Op) {
	type call struct {
		at, took int64
		ok       bool
	}
	var calls []call
	open := map[int]history.Op{}
	for _, op := range ops {
		if op.Process == history.NemesisProcess {
			continue
		}
		if op.Type == history.Invoke {
			open[op.Process] = op
			continue
		}
		if inv, ok := open[op.Process]; ok {
			delete(open, op.Process)
			calls = append(calls, call{at: inv.Time, took: op.Time - inv.Time, ok: op.Type == history.OK})
		}
	}
	for i := range records {
		r := &records[i]
		if r.Fault != "flood" || !r.Injected {
			continue
		}
		end := r.End
		if end == 0 && len(ops) > 0 {
			end = float64(ops[len(ops)-1].Time) / 1e9
		}
		var in, out []int64
		errs, errsOut := 0, 0
		for _, c := range calls {
			if s := float64(c.at) / 1e9; s >= r.Start && s <= end {
				in = append(in, c.took)
				if !c.ok {
					errs++
				}
			} else {
				out = append(out, c.took)
				if !c.ok {
					errsOut++
				}
			}
		}
		lt := &checker.LegitTraffic{Ops: len(in), Errors: errs, P99MS: p99ms(in), P99MSOutside: p99ms(out)}
		if len(in) > 0 {
			lt.ErrorRate = float64(errs) / float64(len(in))
		}
		if len(out) > 0 {
			lt.ErrorRateOutside = float64(errsOut) / float64(len(out))
		}
		r.Legit = lt
	}
}

// p99ms is the 99th percentile of durations in ns, in milliseconds.
func p99ms(ns []int64) float64 {
	if len(ns) == 0 {
		return 0
	}
	s := slices.Clone(ns)
	slices.Sort(s)
	return float64(s[min(len(s)-1, len(s)*99/100)]) / 1e6
}
