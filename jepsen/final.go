package jepsen

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/linkraft/linkraft/jepsen/checker"
	"github.com/linkraft/linkraft/jepsen/history"
)

// finalReads reads the state after recovery. Every register code is read
// linearizably through every node, and those reads go into the history,
// where the register checker judges them with the rest (a lost or
// reverted write, a resurrected delete, shows in them even on a code the
// workload left long ago). Then every node's listing and lease history are
// gathered, and every code the checkers care about — acknowledged creates,
// indeterminate creates some node holds, register codes — is resolved on
// every node.
func finalReads(ctx context.Context, e *runEnv, d *db, final *checker.Final) error {
	pairs, err := history.Pairs(e.rec.Ops())
	if err != nil {
		return err
	}
	codes := map[string]bool{}
	var registers []string
	attempted := map[string]bool{} // URLs of generated creates whose outcome is unknown
	for _, p := range pairs {
		switch {
		case p.Invoke.Workload == "register":
			if !codes[p.Invoke.Key] {
				registers = append(registers, p.Invoke.Key)
			}
			codes[p.Invoke.Key] = true
		case p.Invoke.F != checker.FCreate:
		case p.Completion != nil && p.Completion.Type == history.OK:
			codes[p.Completion.Key] = true
		case p.Completion == nil || p.Completion.Type == history.Info:
			attempted[p.Invoke.Value] = true
		}
	}
	registerTruth(ctx, e, d, registers, final)
	errs := finalListings(ctx, e.cl, d, final)
	for _, links := range final.Links {
		for _, l := range links {
			if attempted[l.URL] {
				codes[l.Code] = true // seen stored: known, so checked everywhere
			}
		}
	}
	sorted := make([]string, 0, len(codes))
	for c := range codes {
		sorted = append(sorted, c)
	}
	sort.Strings(sorted)
	resolveEverywhere(ctx, e.cl, d, sorted, final)
	if err := errors.Join(errs...); err != nil {
		final.Recovered = false
		final.ReadErrors = append(final.ReadErrors, err.Error())
	}
	return nil
}

// registerTruth is the truth about each register code: linearizable reads
// through every node, recorded as register operations of processes of
// their own.
func registerTruth(ctx context.Context, e *runEnv, d *db, registers []string, final *checker.Final) {
	final.Truth = map[string]checker.Read{}
	for _, code := range registers {
		rd := checker.Read{Error: "no node answered"}
		for _, n := range d.nodes {
			w := &worker{env: e, workload: "register", process: e.rec.NewProcess()}
			r := w.exec(checker.FRead, n, code, "", func() result { return e.cl.read(ctx, n.HTTP(), code) })
			if r.typ == history.OK && rd.Error != "" {
				rd = checker.Read{Status: r.op.Status, Location: r.op.Value}
			}
		}
		final.Truth[code] = rd
	}
}

// finalListings reads the API's listing through every node first, then
// every node's own store and lease history: a link the API lists was
// committed before any store was read, so some store holds it, and a
// stored link is committed, so every listing holds it (CheckSet compares
// them). It returns what it could not read, a node at a time.
func finalListings(ctx context.Context, cl *client, d *db, final *checker.Final) []error {
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(d.nodes))
	for i, n := range d.nodes {
		wg.Go(func() {
			// A listing needs every shard's leader: asked again (a page
			// at a time restarts) while one is being elected.
			actx, cancel := context.WithTimeout(ctx, time.Minute)
			listed, err := cl.apiLinks(actx, n.HTTP())
			for err != nil && actx.Err() == nil {
				select {
				case <-actx.Done():
				case <-time.After(500 * time.Millisecond):
					listed, err = cl.apiLinks(actx, n.HTTP())
				}
			}
			cancel()
			if err != nil {
				errs[i] = fmt.Errorf("api listing through %s: %w", n.id, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			final.APIListed[n.id] = listed
		})
	}
	wg.Wait()
	for i, n := range d.nodes {
		wg.Go(func() {
			lctx, cancel := context.WithTimeout(ctx, time.Minute)
			links, err := cl.links(lctx, n.Admin())
			cancel()
			if err != nil {
				// The checkers see a node they could not read and say
				// unknown rather than valid.
				errs[i] = fmt.Errorf("listing %s: %w", n.id, err)
				return
			}
			leases, lerr := cl.leases(ctx, n.Admin())
			if lerr != nil {
				errs[i] = fmt.Errorf("leases of %s: %w", n.id, lerr)
			}
			// A lease names the node ID it was granted to; the history
			// names nodes by the harness's name (a replaced node's new ID
			// is still its address's node).
			for k := range leases {
				leases[k].Node = d.nameOf(leases[k].Node)
			}
			mu.Lock()
			defer mu.Unlock()
			final.Links[n.id] = links
			if lerr == nil {
				final.Leases[n.id] = leases
			}
		})
	}
	wg.Wait()
	return errs
}

// resolveEverywhere resolves every code on every node, 32 at a time per
// node. A read that times out or meets a 503 (an election the load set
// off after recovery) is asked again, up to 4 times: the final read is
// the first definite answer, as Jepsen's final reads are.
func resolveEverywhere(ctx context.Context, cl *client, d *db, codes []string, final *checker.Final) {
	reads := make([]map[string]checker.Read, len(d.nodes))
	var wg sync.WaitGroup
	for i, n := range d.nodes {
		wg.Go(func() { reads[i] = resolveOn(ctx, cl, n.HTTP(), codes, 32) })
	}
	wg.Wait()
	for i, n := range d.nodes {
		final.Resolves[n.id] = reads[i]
	}
}

// resolveOn resolves every code through one node, par at a time. A read
// that times out or meets a 503 is asked again 0.5 s later, up to 4 times:
// the read is the first definite answer.
func resolveOn(ctx context.Context, cl *client, base string, codes []string, par int) map[string]checker.Read {
	out := make(map[string]checker.Read, len(codes))
	var mu sync.Mutex
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for _, code := range codes {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r := cl.resolve(ctx, base, code)
			for try := 1; r.typ != history.OK && try < 4 && ctx.Err() == nil; try++ {
				select {
				case <-ctx.Done():
				case <-time.After(500 * time.Millisecond):
				}
				r = cl.resolve(ctx, base, code)
			}
			rd := checker.Read{Status: r.op.Status, Error: r.op.Error}
			if r.typ == history.OK {
				rd.Location = r.op.Value
			} else if rd.Error == "" {
				rd.Error = "indeterminate"
			}
			mu.Lock()
			out[code] = rd
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// finalDigests polls every node's replica digests until every group's
// replicas are at the same applied index twice in a row (the cluster is
// quiet), or limit passes; it also records each group's members from the
// nodes' Raft configurations.
func finalDigests(ctx context.Context, cl *client, d *db, final *checker.Final, limit time.Duration) {
	final.Replicas = map[string][]string{}
	for _, n := range d.nodes {
		st, err := cl.status(ctx, n.Admin())
		if err != nil {
			continue
		}
		for _, g := range append([]groupStatus{st.Meta}, st.Shards...) {
			if len(g.Replicas) > len(final.Replicas[g.ID]) {
				// Members by the harness's node names, as the digests
				// are (a replaced node's new ID is its address's node).
				names := make([]string, len(g.Replicas))
				for k, id := range g.Replicas {
					names[k] = d.nameOf(id)
				}
				final.Replicas[g.ID] = names
			}
		}
	}
	poll := func() map[string][]checker.GroupDigest {
		out := map[string][]checker.GroupDigest{}
		for _, n := range d.nodes {
			if ds, err := cl.digests(ctx, n.Admin()); err == nil {
				out[n.id] = ds
			}
		}
		return out
	}
	settled := func(a, b map[string][]checker.GroupDigest) bool {
		index := map[string]uint64{}
		for _, n := range d.nodes {
			if len(a[n.id]) == 0 || !slices.Equal(a[n.id], b[n.id]) {
				return false
			}
			for _, g := range a[n.id] {
				if i, ok := index[g.Group]; ok && i != g.AppliedIndex {
					return false
				}
				index[g.Group] = g.AppliedIndex
			}
		}
		return true
	}
	final.Digests, final.DigestsSettled = settle(ctx, 500*time.Millisecond, limit, poll, settled)
}
