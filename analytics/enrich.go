// Package analytics counts clicks without slowing redirects: the redirect
// handler hands each click to a bounded per-node pipeline and never waits.
// The pipeline enriches clicks (country, device, browser, OS, bot, referrer
// host), aggregates them per shard and code, and about once a second
// submits one fsm.ClickBatch per shard through the shard's Raft group. The
// FSM applies a node's batches only in increasing sequence, so a batch
// retried after an unknown outcome never counts twice.
//
// Loss bound: clicks not yet in an acknowledged batch live in memory. A
// crash loses at most what arrived since the last acknowledged flush (one
// flush interval, or more while the shard has no leader); a clean shutdown
// flushes first. Clicks are never over-counted.
package analytics

import (
	"net/netip"
	"net/url"
	"strings"
	"sync"

	useragent "github.com/medama-io/go-useragent"
	"github.com/phuslu/iploc"
	"github.com/x-way/crawlerdetect"
)

// Agent is what a user agent says about the client.
type Agent struct {
	Device  string
	Browser string
	OS      string
	Bot     bool
}

// maxMemo bounds the per-UA memo; past it the memo starts over.
const maxMemo = 10000

// Enricher turns raw request data into report dimensions. It is safe for
// concurrent use; build one per node (the UA parser is large).
type Enricher struct {
	parser   *useragent.Parser
	crawlers *crawlerdetect.CrawlerDetect

	mu   sync.Mutex
	memo map[string]Agent
}

// NewEnricher builds the UA parser and the crawler detector.
func NewEnricher() *Enricher {
	return &Enricher{parser: useragent.NewParser(), crawlers: crawlerdetect.New(), memo: map[string]Agent{}}
}

// Agent classifies a User-Agent. A UA is a bot if either medama's parser or
// crawlerdetect (its second opinion, ~240 µs, hence memoised per UA) says
// so; an empty UA is a bot too (browsers always send one).
func (e *Enricher) Agent(ua string) Agent {
	e.mu.Lock()
	a, ok := e.memo[ua]
	e.mu.Unlock()
	if ok {
		return a
	}
	if strings.TrimSpace(ua) == "" {
		a = Agent{Device: "unknown", Browser: "unknown", OS: "unknown", Bot: true}
	} else {
		p := e.parser.Parse(ua)
		a = Agent{Device: orUnknown(string(p.Device())), Browser: orUnknown(string(p.Browser())), OS: orUnknown(string(p.OS())),
			Bot: p.IsBot() || e.crawlers.IsCrawler(ua)}
	}
	e.mu.Lock()
	if len(e.memo) >= maxMemo {
		e.memo = map[string]Agent{}
	}
	e.memo[ua] = a
	e.mu.Unlock()
	return a
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// Country is the ISO 3166 code of ip's country (IP2Location LITE data), or
// "unknown".
func Country(ip netip.Addr) string {
	if !ip.IsValid() {
		return "unknown"
	}
	c := iploc.IPCountry(ip.Unmap())
	if c == "" || c == "ZZ" {
		return "unknown"
	}
	return c
}

// RefererHost is the lowercased host of a Referer header, "direct" when
// there is none, "unknown" when it is not an absolute http(s) URL.
func RefererHost(ref string) string {
	if ref == "" {
		return "direct"
	}
	u, err := url.Parse(ref)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return "unknown"
	}
	h := strings.ToLower(u.Hostname())
	if len(h) > 253 {
		return "unknown"
	}
	return h
}

// Anonymize keeps the network part of an address: /24 for IPv4, /48 for
// IPv6. Nothing finer is ever stored.
func Anonymize(ip netip.Addr) netip.Addr {
	ip = ip.Unmap()
	bits := 48
	if ip.Is4() {
		bits = 24
	}
	p, err := ip.Prefix(bits)
	if err != nil {
		return netip.Addr{}
	}
	return p.Addr()
}
