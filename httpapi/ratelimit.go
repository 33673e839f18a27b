package httpapi

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/linkraft/linkraft/internal/netid"
)

// Rate limits are token buckets, per key and (for anonymous creates and,
// when turned on, redirects) per client network, kept by each node: the cluster-wide limit is the limit
// times the nodes a client spreads its requests over. Admin keys are not
// limited. The answer carries the IETF httpapi RateLimit-Policy and
// RateLimit fields, and a refusal is 429 with Retry-After.

// Rate is a token bucket's refill rate and size.
type Rate struct {
	// PerSecond is the refill rate (tokens per second); 0 turns the limit
	// off.
	PerSecond float64
	// Burst is the bucket's size: the most requests at once.
	Burst int
}

// DefaultKeyRate is -rate-limit's default: 50 requests a second per key,
// bursts of 100.
var DefaultKeyRate = Rate{PerSecond: 50, Burst: 100}

// DefaultAnonymousRate is -anonymous-rate-limit's default: 10 creates a
// minute per client network.
var DefaultAnonymousRate = Rate{PerSecond: 10.0 / 60, Burst: 10}

// maxBuckets bounds each limiter's table; when it is full, buckets that
// have refilled (they hold no information) are dropped, and if none has,
// the oldest half goes.
const maxBuckets = 100_000

type bucket struct {
	tokens float64
	last   time.Time
}

// limiter is a table of token buckets.
type limiter struct {
	mu      sync.Mutex
	buckets map[string]*bucket
	now     func() time.Time
}

func newLimiter(now func() time.Time) *limiter {
	return &limiter{buckets: map[string]*bucket{}, now: now}
}

// verdict is one decision with what the headers say.
type verdict struct {
	ok bool
	// remaining tokens after the request; retry is how long until cost
	// tokens are there (when refused); full is how long until the bucket
	// is full again.
	remaining   int
	retry, full time.Duration
}

// take spends cost tokens of id's bucket at rate, if it holds them.
func (l *limiter) take(id string, rate Rate, cost int) verdict {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[id]
	if !ok {
		if len(l.buckets) >= maxBuckets {
			l.evict(now)
		}
		b = &bucket{tokens: float64(rate.Burst), last: now}
		l.buckets[id] = b
	}
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = math.Min(float64(rate.Burst), b.tokens+el*rate.PerSecond)
	}
	b.last = now
	v := verdict{}
	if c := float64(cost); b.tokens >= c {
		b.tokens -= c
		v.ok = true
	} else {
		v.retry = time.Duration((c - b.tokens) / rate.PerSecond * float64(time.Second))
		if cost > rate.Burst {
			// Never possible at once: wait for a full bucket.
			v.retry = time.Duration((float64(rate.Burst) - b.tokens) / rate.PerSecond * float64(time.Second))
		}
	}
	v.remaining = int(b.tokens)
	v.full = time.Duration((float64(rate.Burst) - b.tokens) / rate.PerSecond * float64(time.Second))
	return v
}

// evict drops buckets that are full by now; if none is, it drops half the
// table (a flood of new clients loses their history, not the node its
// memory).
func (l *limiter) evict(now time.Time) {
	for id, b := range l.buckets {
		if now.Sub(b.last) > time.Minute {
			delete(l.buckets, id)
		}
	}
	if len(l.buckets) < maxBuckets {
		return
	}
	n := 0
	for id := range l.buckets {
		if n%2 == 0 {
			delete(l.buckets, id)
		}
		n++
	}
}

// clientNet is the rate-limit identity of an address: IPv4 as is, IPv6 by
// its /64 (internal/netid).
func clientNet(ip netip.Addr) string { return netid.Key(netid.Of(ip)) }

// limitRedirect is limit for GET and HEAD /{code} when
// -redirect-rate-limit is on; it reports false having answered 429.
func (s *Server) limitRedirect(w http.ResponseWriter, r *http.Request) bool {
	if s.redirRate.PerSecond <= 0 {
		return true // off (the default): not even the client address is read
	}
	return s.spend(w, r, s.redirLimiter, "ip:"+clientNet(s.clientIP(r)), "redirect", s.redirRate, 1)
}

// limitRender is limit for the pages that cost a render (QR codes,
// previews) when Config.RenderRate is set, spending cost tokens (at most
// the burst); it reports false having answered 429.
func (s *Server) limitRender(w http.ResponseWriter, r *http.Request, cost int) bool {
	if s.renderRate.PerSecond <= 0 {
		return true
	}
	cost = min(max(cost, 1), s.renderRate.Burst)
	return s.spend(w, r, s.renderLimiter, "ip:"+clientNet(s.clientIP(r)), "render", s.renderRate, cost)
}

// limit spends cost tokens for p and sets the RateLimit fields; it answers
// 429 and reports false if the bucket lacks them.
func (s *Server) limit(w http.ResponseWriter, r *http.Request, p *principal, cost int) bool {
	id, policy, rate, limited := s.rateOf(p)
	if !limited {
		return true
	}
	return s.spend(w, r, s.limiter, id, policy, rate, cost)
}

// rateOf is p's bucket, policy name and rate; limited is false for admin
// keys.
func (s *Server) rateOf(p *principal) (id, policy string, rate Rate, limited bool) {
	switch {
	case p.anon:
		return "ip:" + clientNet(p.ip), "anonymous", s.anonRate, true
	case p.admin():
		return "", "", Rate{}, false
	}
	rate = s.keyRate
	if p.key.RateLimit > 0 {
		rate = Rate{PerSecond: float64(p.key.RateLimit), Burst: 2 * int(p.key.RateLimit)}
	}
	return "key:" + p.key.ID, "key", rate, true
}

// pace takes n tokens (at most the bucket's size) of p's bucket, waiting
// for them as long as ctx allows: a long request (an import) goes at the
// caller's rate instead of failing part-way.
func (s *Server) pace(ctx context.Context, p *principal, n int) error {
	id, _, rate, limited := s.rateOf(p)
	if !limited || rate.PerSecond <= 0 || rate.Burst <= 0 {
		return nil
	}
	n = min(n, rate.Burst)
	for {
		v := s.limiter.take(id, rate, n)
		if v.ok {
			return nil
		}
		t := time.NewTimer(v.retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// spend takes cost tokens of bucket id in lim at rate and sets the
// RateLimit fields; it answers 429 with Retry-After and reports false when
// the bucket lacks them. A rate of 0 or less is no limit.
func (s *Server) spend(w http.ResponseWriter, r *http.Request, lim *limiter, id, policy string, rate Rate, cost int) bool {
	if rate.PerSecond <= 0 || rate.Burst <= 0 {
		return true
	}
	if cost > rate.Burst {
		// Never possible: the bucket never holds that many. Refused once,
		// saying how large a request may be, rather than a Retry-After
		// that never comes true.
		s.Error(w, r, &requestError{status: http.StatusRequestEntityTooLarge, kind: "over-rate-limit-burst", title: "Content Too Large",
			detail: fmt.Sprintf("this request costs %d rate-limit tokens (one a link), and the %q limit's bucket holds %d: send at most %d a request",
				cost, policy, rate.Burst, rate.Burst)})
		return false
	}
	v := lim.take(id, rate, cost)
	h := w.Header()
	window := int(math.Ceil(float64(rate.Burst) / rate.PerSecond))
	h.Set("RateLimit-Policy", `"`+policy+`";q=`+strconv.Itoa(rate.Burst)+";w="+strconv.Itoa(window))
	h.Set("RateLimit", `"`+policy+`";r=`+strconv.Itoa(v.remaining)+";t="+strconv.Itoa(int(math.Ceil(v.full.Seconds()))))
	if v.ok {
		return true
	}
	h.Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(v.retry.Seconds())))))
	s.Error(w, r, &requestError{status: http.StatusTooManyRequests, kind: "rate-limited", title: "Too Many Requests",
		detail: "over the rate limit of " + strconv.FormatFloat(rate.PerSecond, 'g', 4, 64) + " requests a second (bursts of " +
			strconv.Itoa(rate.Burst) + "); retry after Retry-After seconds"})
	return false
}
