package idrange

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Leaser leases a block of n IDs through the meta Raft group. The range
// [start, end) it returns is committed before it is returned and is never
// handed to anyone else.
type Leaser interface {
	LeaseRange(ctx context.Context, n uint64) (start, end uint64, err error)
}

// LeaserFunc adapts a function to Leaser.
type LeaserFunc func(ctx context.Context, n uint64) (uint64, uint64, error)

// LeaseRange implements Leaser.
func (f LeaserFunc) LeaseRange(ctx context.Context, n uint64) (uint64, uint64, error) {
	return f(ctx, n)
}

// AllocatorConfig configures an Allocator.
type AllocatorConfig struct {
	// Leaser leases ranges; required.
	Leaser Leaser
	// BlockSize is the number of IDs leased at a time (default 1024).
	BlockSize uint64
	// LowWater is how many IDs may remain in the current range before the
	// next one is prefetched (default BlockSize/4).
	LowWater uint64
}

// Allocator hands out IDs from leased ranges, prefetching the next range
// before the current one runs dry. It is safe for concurrent use.
type Allocator struct {
	leaser    Leaser
	blockSize uint64
	lowWater  uint64

	ctx    context.Context // cancelled by Close; bounds background leases
	cancel context.CancelFunc

	mu       sync.Mutex
	next     uint64 // next ID of the current range
	end      uint64 // end of the current range (exclusive)
	pending  *[2]uint64
	fetching chan struct{} // closed when the in-flight lease finishes
	fetchErr error
}

// NewAllocator returns an Allocator with an empty current range: the first
// Next leases one.
func NewAllocator(cfg AllocatorConfig) (*Allocator, error) {
	if cfg.Leaser == nil {
		return nil, errors.New("idrange: AllocatorConfig.Leaser is required")
	}
	if cfg.BlockSize == 0 {
		cfg.BlockSize = 1024
	}
	if cfg.LowWater == 0 || cfg.LowWater >= cfg.BlockSize {
		cfg.LowWater = cfg.BlockSize / 4
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Allocator{leaser: cfg.Leaser, blockSize: cfg.BlockSize, lowWater: cfg.LowWater, ctx: ctx, cancel: cancel}, nil
}

// Close cancels any lease in flight. IDs of leased but unused ranges are
// never used; that is by design.
func (a *Allocator) Close() { a.cancel() }

// Next returns an ID never returned before by any allocator of the cluster.
// It blocks only when the current range is used up and the next one has not
// arrived yet.
func (a *Allocator) Next(ctx context.Context) (uint64, error) {
	for {
		a.mu.Lock()
		if a.next == a.end && a.pending != nil {
			a.next, a.end = a.pending[0], a.pending[1]
			a.pending = nil
		}
		if a.next < a.end {
			id := a.next
			a.next++
			if a.end-a.next <= a.lowWater && a.pending == nil {
				a.startFetchLocked()
			}
			a.mu.Unlock()
			return id, nil
		}
		// Empty and nothing prefetched: make sure a lease is in flight and
		// wait for it.
		if a.fetching == nil {
			if err := a.fetchErr; err != nil {
				// Report the previous failure once, then try again.
				a.fetchErr = nil
				a.mu.Unlock()
				return 0, err
			}
			a.startFetchLocked()
		}
		ch := a.fetching
		a.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// startFetchLocked starts one background lease; a.mu must be held.
func (a *Allocator) startFetchLocked() {
	if a.fetching != nil {
		return
	}
	ch := make(chan struct{})
	a.fetching = ch
	go func() {
		// The lease outlives any single caller: it is bounded by the
		// allocator's lifetime and the leaser's own timeouts, not by the
		// request that happened to trigger it.
		start, end, err := a.leaser.LeaseRange(a.ctx, a.blockSize)
		if err == nil && end <= start {
			err = fmt.Errorf("idrange: leaser returned empty range [%d, %d)", start, end)
		}
		a.mu.Lock()
		if err != nil {
			a.fetchErr = err
		} else {
			a.fetchErr = nil
			a.pending = &[2]uint64{start, end}
		}
		a.fetching = nil
		a.mu.Unlock()
		close(ch)
	}()
}

// Remaining returns how many IDs are left in the current and prefetched
// ranges (for tests and metrics).
func (a *Allocator) Remaining() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.end - a.next
	if a.pending != nil {
		n += a.pending[1] - a.pending[0]
	}
	return n
}
