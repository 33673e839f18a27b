package cluster_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/testcluster"
	"github.com/linkraft/linkraft/link"
)

// TestCreateOnceAcrossNodes: a create with an Idempotency-Key, retried
// through every node of a 3-node cluster (at once, and again after), makes
// one link and answers it each time; the first answer is not a replay and
// the retries are. The same key with another body is refused and stores
// nothing; a bulk create with a key makes its links once.
func TestCreateOnceAcrossNodes(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 3, Expect: 3})
	tc.StartAll(0, 1, 2)
	tc.WaitReplicated(3)
	req := link.CreateRequest{URL: "https://once.example/a", Owner: "team"}
	idem := link.IdempotencyKey("team", "key-1", []byte(`{"url":"https://once.example/a"}`))
	first, replayed, err := tc.Nodes[0].Links().CreateOnce(ctx(t), req, idem)
	if err != nil || replayed {
		t.Fatalf("first: %v replayed=%v", err, replayed)
	}
	var wg sync.WaitGroup
	got := make([]string, 6)
	errs := make([]error, 6)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, replayed, err := tc.Nodes[i%3].Links().CreateOnce(ctx(t), req, idem)
			switch {
			case err != nil:
				errs[i] = err
			case !replayed:
				errs[i] = fmt.Errorf("retry %d not marked as a replay", i)
			default:
				got[i] = l.Code
			}
		}()
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil || got[i] != first.Code {
			t.Fatalf("retry %d through n%d: %q %v, want %s", i, i%3+1, got[i], errs[i], first.Code)
		}
	}
	count := func() int {
		n := 0
		for _, sh := range tc.Nodes[0].LocalShards() {
			_ = sh.Scan("", func(l *link.Link) bool {
				if l.URL == req.URL {
					n++
				}
				return true
			})
		}
		return n
	}
	// Every shard is on every node (3 replicas), so node 0 holds them all.
	if n := count(); n != 1 {
		t.Fatalf("%d links made, want 1", n)
	}
	other := link.IdempotencyKey("team", "key-1", []byte(`{"url":"https://once.example/b"}`))
	if _, _, err := tc.Nodes[1].Links().CreateOnce(ctx(t), link.CreateRequest{URL: "https://once.example/b", Owner: "team"}, other); !errors.Is(err, link.ErrIdempotencyMismatch) {
		t.Fatalf("the key with another body: %v", err)
	}
	// Another owner's key of the same name is another key.
	if l, replayed, err := tc.Nodes[2].Links().CreateOnce(ctx(t), req, link.IdempotencyKey("someone", "key-1", []byte(`{"url":"https://once.example/a"}`))); err != nil || replayed || l.Code == first.Code {
		t.Fatalf("another owner's key: %v %v %v", l, replayed, err)
	}

	bulk := []link.CreateRequest{{URL: "https://once.example/bulk1"}, {URL: "https://once.example/bulk2", Alias: "once-alias"}, {URL: "https://once.example/bulk3"}}
	bidem := link.IdempotencyKey("team", "bulk-key", []byte("bulk body"))
	a, replayed, err := tc.Nodes[1].Links().CreateManyOnce(ctx(t), bulk, bidem)
	if err != nil || replayed {
		t.Fatalf("bulk: %v %v", err, replayed)
	}
	b, replayed, err := tc.Nodes[2].Links().CreateManyOnce(ctx(t), bulk, bidem)
	if err != nil || !replayed {
		t.Fatalf("bulk retry: %v %v", err, replayed)
	}
	for i := range a {
		if a[i].Err != nil || b[i].Err != nil || a[i].Link.Code != b[i].Link.Code {
			t.Fatalf("bulk item %d: %+v then %+v", i, a[i], b[i])
		}
	}
	if a[1].Link.Code != "once-alias" {
		t.Fatalf("the alias: %s", a[1].Link.Code)
	}
	if _, _, err := tc.Nodes[0].Links().CreateManyOnce(ctx(t), bulk[:2], bidem); !errors.Is(err, link.ErrIdempotencyMismatch) {
		t.Fatalf("a bulk key with fewer links: %v", err)
	}
}

// TestCreateOnceFinishesAnInterruptedFirst: a request that claimed its key
// and failed before its create (the node died between the two) is finished
// by its retry: the claimed code is made, not a new one.
func TestCreateOnceFinishesAnInterruptedFirst(t *testing.T) {
	t.Parallel()
	n := testcluster.Node(t, cluster.Config{DataDir: t.TempDir(), Shards: 2})
	t.Cleanup(func() { _ = n.Close() })
	idem := link.IdempotencyKey("team", "k", []byte("body"))
	claim := command.ClaimKey{Key: idem.Key, Body: idem.Body, Codes: []string{"claimed1"}, Now: time.Now().UTC(), Attempt: 1}
	if _, err := n.RetryUnknown(ctx(t), n.Locate(idem.Key).Group(), claim.Encode()); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Links().Get(ctx(t), "claimed1", true); !errors.Is(err, link.ErrNotFound) {
		t.Fatalf("claimed1 before the retry: %v", err)
	}
	l, replayed, err := n.Links().CreateOnce(ctx(t), link.CreateRequest{URL: "https://once.example/"}, idem)
	if err != nil || !replayed || l.Code != "claimed1" {
		t.Fatalf("retry: %+v %v %v", l, replayed, err)
	}
}
