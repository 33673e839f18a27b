package idrange

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkraft/linkraft/internal/testkit"
)

func TestEncodeKnownValues(t *testing.T) {
	t.Parallel()
	cases := map[uint64]string{0: "0", 9: "9", 10: "A", 35: "Z", 36: "a", 61: "z", 62: "10", 3843: "zz", math.MaxUint64: "LygHa16AHYF"}
	for n, want := range cases {
		if got := Encode(n); got != want {
			t.Errorf("Encode(%d) = %q, want %q", n, got, want)
		}
		back, err := Decode(want)
		if err != nil || back != n {
			t.Errorf("Decode(%q) = %d, %v; want %d", want, back, err, n)
		}
	}
	if got := EncodePadded(61, 7); got != "000000z" {
		t.Errorf("EncodePadded(61, 7) = %q", got)
	}
}

func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "-", "a b", "é", "LygHa16AHYG", "zzzzzzzzzzzz"} {
		if _, err := Decode(s); !errors.Is(err, ErrInvalidBase62) {
			t.Errorf("Decode(%q) err = %v, want ErrInvalidBase62", s, err)
		}
	}
}

func FuzzBase62RoundTrip(f *testing.F) {
	for _, n := range []uint64{0, 1, 61, 62, 1 << 40, math.MaxUint64} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n uint64) {
		s := Encode(n)
		got, err := Decode(s)
		if err != nil || got != n {
			t.Fatalf("round trip %d -> %q -> %d, %v", n, s, got, err)
		}
	})
}

func FuzzBase62Decode(f *testing.F) {
	for _, s := range []string{"0", "zz", "LygHa16AHYF", "!", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Decode(s)
		if err != nil {
			return
		}
		// Decode accepts leading zeros; Encode gives the shortest form.
		if got := EncodePadded(n, len(s)); got != s {
			t.Fatalf("Decode(%q) = %d, re-encoded %q", s, n, got)
		}
	})
}

var testKey = []byte("0123456789abcdef")

func TestPermutationIsBijectiveOnSample(t *testing.T) {
	t.Parallel()
	p, err := NewPermutation(testKey)
	if err != nil {
		t.Fatal(err)
	}
	const n = 200_000
	seen := make(map[uint64]uint64, n)
	sequentialRun := 0
	var prev uint64
	for id := uint64(0); id < n; id++ {
		v, err := p.Permute(id)
		if err != nil {
			t.Fatal(err)
		}
		if v >= PermDomain {
			t.Fatalf("Permute(%d) = %d outside the domain", id, v)
		}
		if other, dup := seen[v]; dup {
			t.Fatalf("Permute(%d) = Permute(%d) = %d", id, other, v)
		}
		seen[v] = id
		back, err := p.Invert(v)
		if err != nil || back != id {
			t.Fatalf("Invert(Permute(%d)) = %d, %v", id, back, err)
		}
		if id > 0 && v == prev+1 {
			sequentialRun++
		}
		prev = v
	}
	if sequentialRun > 10 {
		t.Errorf("%d of %d consecutive ids map to consecutive values: not a scrambling permutation", sequentialRun, n)
	}
	// Domain edges.
	for _, id := range []uint64{PermDomain - 1, PermDomain - 2} {
		v, err := p.Permute(id)
		if err != nil {
			t.Fatal(err)
		}
		if back, _ := p.Invert(v); back != id {
			t.Fatalf("edge %d: round trip gave %d", id, back)
		}
	}
	if _, err := p.Permute(PermDomain); !errors.Is(err, ErrOutOfDomain) {
		t.Fatalf("Permute(PermDomain) err = %v", err)
	}
}

func TestPermutationDependsOnKey(t *testing.T) {
	t.Parallel()
	a, _ := NewPermutation(testKey)
	b, _ := NewPermutation([]byte("fedcba9876543210"))
	same := 0
	for id := uint64(0); id < 1000; id++ {
		x, _ := a.Permute(id)
		y, _ := b.Permute(id)
		if x == y {
			same++
		}
	}
	if same > 1 {
		t.Fatalf("%d of 1000 ids map equally under two keys", same)
	}
	if _, err := NewPermutation([]byte("short")); err == nil {
		t.Fatal("short key accepted")
	}
}

func FuzzPermutation(f *testing.F) {
	p, err := NewPermutation(testKey)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint64(0))
	f.Add(PermDomain - 1)
	f.Add(PermDomain)
	f.Fuzz(func(t *testing.T, id uint64) {
		v, err := p.Permute(id)
		if id >= PermDomain {
			if !errors.Is(err, ErrOutOfDomain) {
				t.Fatalf("Permute(%d) err = %v", id, err)
			}
			return
		}
		if err != nil || v >= PermDomain {
			t.Fatalf("Permute(%d) = %d, %v", id, v, err)
		}
		back, err := p.Invert(v)
		if err != nil || back != id {
			t.Fatalf("Invert(%d) = %d, %v; want %d", v, back, err, id)
		}
	})
}

func TestCoderModes(t *testing.T) {
	t.Parallel()
	perm, err := NewCoder(ModePermuted, testKey)
	if err != nil {
		t.Fatal(err)
	}
	seq, err := NewCoder(ModeSequential, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{0, 1, 62, 999_999} {
		c, err := perm.Code(id)
		if err != nil || len(c) != CodeLength {
			t.Fatalf("permuted Code(%d) = %q, %v", id, c, err)
		}
		if back, err := perm.ID(c); err != nil || back != id {
			t.Fatalf("permuted ID(%q) = %d, %v", c, back, err)
		}
		s, _ := seq.Code(id)
		if s != Encode(id) {
			t.Fatalf("sequential Code(%d) = %q", id, s)
		}
		if back, err := seq.ID(s); err != nil || back != id {
			t.Fatalf("sequential ID(%q) = %d, %v", s, back, err)
		}
	}
	if _, err := perm.Code(PermDomain); !errors.Is(err, ErrExhausted) {
		t.Fatalf("Code past the domain: %v", err)
	}
	if _, err := NewCoder("bogus", nil); err == nil {
		t.Fatal("unknown mode accepted")
	}
}

// rangeLeaser hands out consecutive ranges like the meta FSM does.
type rangeLeaser struct {
	mu    sync.Mutex
	next  uint64
	calls atomic.Int64
	fail  atomic.Bool
	gate  chan struct{} // if non-nil, each lease waits for a token
}

func (l *rangeLeaser) LeaseRange(ctx context.Context, n uint64) (uint64, uint64, error) {
	l.calls.Add(1)
	if l.gate != nil {
		select {
		case <-l.gate:
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		}
	}
	if l.fail.Load() {
		return 0, 0, errors.New("no leader")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.next
	l.next += n
	return s, s + n, nil
}

func TestAllocatorConcurrentUnique(t *testing.T) {
	t.Parallel()
	l := &rangeLeaser{}
	a, err := NewAllocator(AllocatorConfig{Leaser: l, BlockSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	const workers, each = 16, 200
	ids := make(chan uint64, workers*each)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				id, err := a.Next(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				ids <- id
			}
		}()
	}
	wg.Wait()
	close(ids)
	seen := map[uint64]bool{}
	for id := range ids {
		if seen[id] {
			t.Fatalf("id %d handed out twice", id)
		}
		seen[id] = true
	}
	if len(seen) != workers*each {
		t.Fatalf("got %d ids", len(seen))
	}
}

func TestAllocatorPrefetchesBeforeDry(t *testing.T) {
	t.Parallel()
	l := &rangeLeaser{gate: make(chan struct{}, 10)}
	a, _ := NewAllocator(AllocatorConfig{Leaser: l, BlockSize: 8, LowWater: 2})
	defer a.Close()
	l.gate <- struct{}{}
	ctx := context.Background()
	for i := 0; i < 6; i++ { // leaves 2 in the first range: the prefetch starts
		if _, err := a.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Let the prefetch complete and wait until it has landed.
	l.gate <- struct{}{}
	testkit.Eventually(t, 5*time.Second, func() error {
		if r := a.Remaining(); r != 2+8 {
			return fmt.Errorf("prefetch not landed: remaining %d, leases %d", r, l.calls.Load())
		}
		return nil
	})
	// The next 10 IDs need no further lease.
	for i := 0; i < 10; i++ {
		id, err := a.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if id != uint64(6+i) {
			t.Fatalf("id %d, want %d", id, 6+i)
		}
	}
}

func TestAllocatorReportsLeaseFailureAndRecovers(t *testing.T) {
	t.Parallel()
	l := &rangeLeaser{}
	l.fail.Store(true)
	a, _ := NewAllocator(AllocatorConfig{Leaser: l, BlockSize: 4})
	defer a.Close()
	if _, err := a.Next(context.Background()); err == nil {
		t.Fatal("Next succeeded without a lease")
	}
	l.fail.Store(false)
	id, err := a.Next(context.Background())
	if err != nil || id != 0 {
		t.Fatalf("after recovery Next = %d, %v", id, err)
	}
}

func TestAllocatorHonoursContext(t *testing.T) {
	t.Parallel()
	l := &rangeLeaser{gate: make(chan struct{})}
	a, _ := NewAllocator(AllocatorConfig{Leaser: l, BlockSize: 4})
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := a.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
}
