package cluster_test

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/linkraft/linkraft/internal/testcluster"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/link"
)

// TestFormationIsOneClusterInAnyOrder: bootstrap-expect + 2 new nodes (5
// with bootstrap-expect 3) start at once, in a different order and with
// different delays each round. Every round ends with exactly one cluster:
// every node holds the same cluster ID and the meta group has all five.
// Before formation.go, a node arriving while the first three formed could
// make two of them bootstrap different voter sets.
func TestFormationIsOneClusterInAnyOrder(t *testing.T) {
	t.Parallel()
	const expect, size, rounds = 3, 5, 6
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 13))
	for round := range rounds {
		tc := testcluster.New(t, testcluster.Options{Size: size, Expect: expect})
		// Every node knows every gossip address, as an operator would give.
		var all []string
		for _, cfg := range tc.Cfgs {
			all = append(all, cfg.GossipAddr)
		}
		for i := range tc.Cfgs {
			tc.Cfgs[i].Join = all
		}
		order := rng.Perm(size)
		delays := make([]time.Duration, size)
		for i := range delays {
			delays[i] = time.Duration(rng.IntN(400)) * time.Millisecond
		}
		if round%2 == 0 {
			// The hard case: the three highest IDs start first and find
			// each other; the two lowest arrive while they form.
			for i := range delays {
				delays[i] = 0
				if i < 2 {
					delays[i] = time.Duration(rng.IntN(300)) * time.Millisecond
				}
			}
		}
		var wg sync.WaitGroup
		errs := make([]error, size)
		for _, i := range order {
			wg.Go(func() {
				time.Sleep(delays[i]) // the start timing under test, not a wait for a condition
				errs[i] = tc.TryStart(i)
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d (order %v, delays %v): start n%d: %v", round, order, delays, i+1, err)
			}
		}
		ids := map[string]bool{}
		for _, n := range tc.Nodes {
			ids[n.Settings().ClusterID] = true
		}
		if len(ids) != 1 {
			t.Fatalf("round %d (order %v, delays %v): %d clusters formed: %v", round, order, delays, len(ids), ids)
		}
		testkit.WaitFor(t, 20*time.Second, "all five in one meta group", func() bool {
			addrs, err := tc.Nodes[0].Meta().Addresses()
			return err == nil && len(addrs) == size
		})
		if _, err := tc.Nodes[order[size-1]].Links().Create(ctx(t), link.CreateRequest{URL: "https://formed.example/"}); err != nil {
			t.Fatalf("round %d: create: %v", round, err)
		}
		tc.CloseAll()
	}
}
