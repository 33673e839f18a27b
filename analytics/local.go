package analytics

import (
	"errors"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
)

// What a node keeps of its own visits: raw visits (VisitStore) and counts
// of requests for unknown codes.

// writeVisits stores the buffered raw visits in one transaction. Writes
// are one at a time, so once it returns every visit buffered before the
// call is stored (Flush relies on it).
func (p *Pipeline) writeVisits() {
	p.visitsMu.Lock()
	defer p.visitsMu.Unlock()
	p.mu.Lock()
	visits := p.visitBuf
	p.visitBuf, p.spareVisits = p.spareVisits, nil
	if p.visitBuf == nil {
		p.visitBuf = &VisitBatch{}
	}
	p.visitsAt = time.Now()
	p.mu.Unlock()
	if visits.Len() > 0 {
		if shed, err := p.cfg.Visits.AddBatch(visits); errors.Is(err, ErrVisitsShed) {
			// A flood sheds at every flush: one line a minute says so, and
			// the shed visits are counted (linkraft_visits_shed_total).
			if now := time.Now(); now.Sub(p.shedLogged) >= time.Minute {
				p.shedLogged = now
				p.cfg.Logger.Warn("raw visits shed: the visit file is at its budget or the disk at its floor; click counts are unaffected",
					"shed", shed, "shed_since_start", p.cfg.Visits.Shed(), "live_bytes", p.cfg.Visits.UsedBytes(), "err", err)
			}
		} else if err != nil {
			p.cfg.Logger.Warn("visits not stored", "count", visits.Len(), "err", err)
		}
	}
	p.writeOrphans()
	// The buffer is used again (two take turns): growing a fresh one to
	// tens of thousands of visits every flush was a good part of the cost.
	visits.Reset()
	p.mu.Lock()
	if p.spareVisits == nil {
		p.spareVisits = visits
	}
	p.mu.Unlock()
}

// writeOrphans adds the orphan counts since the last write to the visit
// file; on failure they are kept for the next write.
func (p *Pipeline) writeOrphans() {
	p.orphanMu.Lock()
	counts, total := p.orphansNew, p.orphansNewTotal
	p.orphansNew, p.orphansNewTotal = map[string]uint64{}, 0
	p.orphanMu.Unlock()
	if p.cfg.Visits == nil {
		return // counted in memory only
	}
	if err := p.cfg.Visits.AddOrphans(counts, total); err != nil {
		p.cfg.Logger.Warn("orphan counts not stored", "err", err)
		p.orphanMu.Lock()
		for c, n := range counts {
			p.orphansNew[c] += n
		}
		p.orphansNewTotal += total
		p.orphanMu.Unlock()
	}
}

// maxFreeAggs bounds the aggs kept for reuse.
const maxFreeAggs = 1 << 16

// maxOrphanCodes bounds the distinct unknown codes counted one by one.
const maxOrphanCodes = 10_000

func networkOf(ip netip.Addr) string {
	if !ip.IsValid() {
		return ""
	}
	a := Anonymize(ip)
	bits := 48
	if a.Is4() {
		bits = 24
	}
	return netip.PrefixFrom(a, bits).String()
}

// stripQuery drops a referrer's query and fragment (they may carry personal
// data) and bounds its length.
func stripQuery(ref string) string {
	if i := strings.IndexAny(ref, "?#"); i >= 0 {
		ref = ref[:i]
	}
	if len(ref) > 512 {
		ref = ref[:512]
	}
	return ref
}

// RecordOrphan counts a request for a code that does not exist.
func (p *Pipeline) RecordOrphan(code string) {
	p.orphanMu.Lock()
	p.orphanTotal++
	p.orphansNewTotal++
	if _, ok := p.orphans[code]; !ok && len(p.orphans) >= maxOrphanCodes {
		code = command.OtherKey
	}
	p.orphans[code]++
	p.orphansNew[code]++
	p.orphanMu.Unlock()
	if o := p.cfg.Observer; o != nil {
		o.OrphanVisit()
	}
}

// Orphans summarises the unknown codes this node was asked for (since its
// visit file was made; since it started without one): the total and the
// top codes.
func (p *Pipeline) Orphans(top int) link.OrphanSummary {
	p.orphanMu.Lock()
	defer p.orphanMu.Unlock()
	out := link.OrphanSummary{Total: p.orphanTotal, Top: []link.CodeCount{}}
	for c, n := range p.orphans {
		out.Top = append(out.Top, link.CodeCount{Code: c, Count: n})
	}
	SortCodeCounts(out.Top)
	if len(out.Top) > top {
		out.Top = out.Top[:top]
	}
	return out
}

// SortCodeCounts orders by count, then code.
func SortCodeCounts(cs []link.CodeCount) {
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].Count != cs[j].Count {
			return cs[i].Count > cs[j].Count
		}
		return cs[i].Code < cs[j].Code
	})
}

// ListVisits returns this node's visits of code (see VisitStore.List); an
// empty list when visit records are off.
func (p *Pipeline) ListVisits(code string, from, to time.Time, limit int) ([]link.Visit, error) {
	if p.cfg.Visits == nil {
		return []link.Visit{}, nil
	}
	return p.cfg.Visits.List(code, from, to, limit)
}
