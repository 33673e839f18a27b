package cluster

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"sort"
	"time"

	"github.com/linkraft/linkraft/analytics"
	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
)

// submitClicks proposes a click batch through shard s's Raft group (on
// its leader, forwarded if need be). An error means the outcome is unknown;
// the caller resends the same batch, which the FSM applies at most once.
func (n *Node) submitClicks(ctx context.Context, s command.ShardID, b *command.ClickBatch) error {
	if err, ok := n.faultSubmitClicks(ctx, s, b); ok {
		return err
	}
	_, err := n.applyGroup(ctx, s.Group(), b.Encode(), 0)
	return err
}

// Stats returns the click statistics of a live or deleted link as q asks,
// with the link they belong to (one lookup): from this node's replica of
// the shard if it hosts one, else from a replica that does. Counts lag the
// clicks by the flush interval and the replication delay.
// link.ErrNotFound if no link ever had the code.
func (n *Node) Stats(ctx context.Context, code string, q link.StatsQuery) (*link.Link, *link.Stats, error) {
	ctx, cancel := withDefaultTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := n.lookupShard(ctx, n.ring.Locate(code), code, false, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := n.clickState(ctx, code, q.From, q.To)
	if err != nil {
		return nil, nil, err
	}
	return l, analytics.Summarize(st, q, l.CreatedAt), nil
}

// ClickCount returns the human clicks of code so far (the replicated counter,
// trailing the redirects by about a flush interval), without looking the
// link up: for a caller that has it already.
func (n *Node) ClickCount(ctx context.Context, code string) (uint64, error) {
	ctx, cancel := withDefaultTimeout(ctx, 5*time.Second)
	defer cancel()
	now := time.Now()
	st, err := n.clickState(ctx, code, now, now)
	if err != nil {
		return 0, err
	}
	return st.Totals.Humans.Total, nil
}

// clickState reads code's click totals and its hourly counts in
// [from, to) from a replica of its shard, this node's first.
func (n *Node) clickState(ctx context.Context, code string, from, to time.Time) (*command.ClickStats, error) {
	s := n.ring.Locate(code)
	if sh := n.localShard(s); sh != nil {
		return sh.FSM().Clicks(code, from, to)
	}
	none := fmt.Errorf("%w: no replica of shard %d known", link.ErrUnavailable, s)
	return askReplicas(n, s, none, unavailable, func(addr string) (*command.ClickStats, error) {
		return n.peers.Clicks(ctx, addr, s, code, from, to)
	})
}

// visitorSalt is the salt of visitor hashes on a UTC day: an HMAC of the
// day under a key derived from the cluster's secret code key, so every node
// agrees on it (a visitor counts once whichever node they reach) and it
// changes daily (hashes of different days cannot be linked).
func (n *Node) visitorSalt(day time.Time) []byte {
	mac := hmac.New(sha256.New, n.settings.CodeKey)
	mac.Write([]byte("linkraft visitor salt\x00"))
	mac.Write([]byte(day.UTC().Format("2006-01-02")))
	return mac.Sum(nil)
}

// ConsumeVisit grants one visit of a link with a visit limit, through the
// shard's Raft group, so exactly MaxVisits grants ever succeed cluster-wide;
// link.ErrGone once they are used up. A grant whose outcome is unknown is
// retried with the same nonce (never counted twice) until ctx ends. Links
// without a limit cost nothing here: callers skip them.
func (n *Node) ConsumeVisit(ctx context.Context, code string) (*link.Link, error) {
	ctx, cancel := withDefaultTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := (&command.ConsumeVisit{Code: code, Nonce: newNonce()}).Encode()
	group := n.ring.Locate(code).Group()
	r, err := n.retryUnknown(ctx, group, cmd)
	if err != nil {
		return nil, err
	}
	n.announceChange(r.Link)
	return r.Link, nil
}

// Gathered says which nodes a cluster-wide answer is missing.
type Gathered struct {
	// Partial is set when some member did not answer in time.
	Partial bool `json:"partial"`
	// Missing lists those members.
	Missing []string `json:"missing_nodes,omitempty"`
}

// gather calls ask with every member but this node (in parallel, each
// bounded by ctx) and returns the answers of those that replied.
func gather[T any](ctx context.Context, n *Node, ask func(addr string) (T, error)) ([]T, Gathered) {
	var g Gathered
	type answer struct {
		id  string
		v   T
		err error
	}
	var asked []NodeInfo
	for _, m := range n.nodes() {
		if m.ID != n.cfg.NodeID {
			asked = append(asked, m)
		}
	}
	ch := make(chan answer, len(asked))
	for _, m := range asked {
		go func() {
			if m.RaftAddr == "" || m.Status == "failed" {
				ch <- answer{id: m.ID, err: fmt.Errorf("%w: %s is down", link.ErrUnavailable, m.ID)}
				return
			}
			v, err := ask(m.RaftAddr)
			ch <- answer{id: m.ID, v: v, err: err}
		}()
	}
	var out []T
	for range asked {
		a := <-ch
		if a.err != nil {
			g.Partial = true
			g.Missing = append(g.Missing, a.id)
			continue
		}
		out = append(out, a.v)
	}
	return out, g
}

// Visits gathers the raw visits of code in [from, to) from every node (each
// keeps its own), newest first, at most limit; nodes that do not answer
// within ctx (default 2 s) make the answer partial.
func (n *Node) Visits(ctx context.Context, code string, from, to time.Time, limit int) ([]link.Visit, Gathered, error) {
	ctx, cancel := withDefaultTimeout(ctx, 2*time.Second)
	defer cancel()
	visits, err := n.localVisits(code, from, to, limit)
	if err != nil {
		return nil, Gathered{}, err
	}
	answers, g := gather(ctx, n, func(addr string) ([]link.Visit, error) { return n.peers.Visits(ctx, addr, code, from, to, limit) })
	for _, a := range answers {
		visits = append(visits, a...)
	}
	sort.SliceStable(visits, func(i, j int) bool { return visits[i].Time.After(visits[j].Time) })
	if len(visits) > limit {
		visits = visits[:limit]
	}
	return visits, g, nil
}

// Orphans sums the unknown-code counts of every node.
func (n *Node) Orphans(ctx context.Context, top int) (link.OrphanSummary, Gathered) {
	ctx, cancel := withDefaultTimeout(ctx, 2*time.Second)
	defer cancel()
	// Each node sends more than top, so the sum's top is closer to right.
	local := n.localOrphans(top * 4)
	answers, g := gather(ctx, n, func(addr string) (*link.OrphanSummary, error) { return n.peers.Orphans(ctx, addr, top*4) })
	byCode := map[string]uint64{}
	total := local.Total
	for _, c := range local.Top {
		byCode[c.Code] += c.Count
	}
	for _, a := range answers {
		total += a.Total
		for _, c := range a.Top {
			byCode[c.Code] += c.Count
		}
	}
	out := link.OrphanSummary{Total: total, Top: []link.CodeCount{}}
	for c, k := range byCode {
		out.Top = append(out.Top, link.CodeCount{Code: c, Count: k})
	}
	sort.Slice(out.Top, func(i, j int) bool {
		if out.Top[i].Count != out.Top[j].Count {
			return out.Top[i].Count > out.Top[j].Count
		}
		return out.Top[i].Code < out.Top[j].Code
	})
	if len(out.Top) > top {
		out.Top = out.Top[:top]
	}
	return out, g
}
