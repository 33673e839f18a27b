package httpapi

import (
	"fmt"
	"strconv"
	"testing"
	"time"
)

// A flood of new clients cannot grow a limiter's table past maxBuckets.
func TestLimiterTableIsBounded(t *testing.T) {
	t.Parallel()
	now := time.Unix(1e9, 0)
	l := newLimiter(func() time.Time { return now })
	rate := Rate{PerSecond: 1, Burst: 2}
	for i := 0; i < 3*maxBuckets; i++ {
		if v := l.take(fmt.Sprintf("ip:10.%d.%d.%d", i>>16, (i>>8)&255, i&255), rate, 1); !v.ok {
			t.Fatalf("a new client's first request was refused: %+v", v)
		}
		if len(l.buckets) > maxBuckets {
			t.Fatalf("%d buckets after %d clients, want at most %d", len(l.buckets), i+1, maxBuckets)
		}
	}
	// A client that is limited stays limited while its bucket is kept.
	l = newLimiter(func() time.Time { return now })
	for i := 0; i < 2; i++ {
		l.take("key:k", rate, 1)
	}
	if v := l.take("key:k", rate, 1); v.ok || v.retry != time.Second || v.remaining != 0 {
		t.Fatalf("third request in a burst of 2: %+v", v)
	}
	now = now.Add(time.Second)
	if v := l.take("key:k", rate, 1); !v.ok {
		t.Fatalf("after a second's refill: %+v", v)
	}
}

// TestSuspectsAreBounded: the networks remembered as wrong guessers are at
// most maxSuspects however many guess (a flood of networks costs no more
// memory), those older than an hour go first, and a fresh entry is kept.
func TestSuspectsAreBounded(t *testing.T) {
	t.Parallel()
	now := time.Unix(0, 0)
	s := newSuspects(func() time.Time { return now })
	for i := range maxSuspects {
		s.add("old", strconv.Itoa(i))
	}
	now = now.Add(2 * suspectMemory)
	if s.has("old", "7") {
		t.Fatal("a guess from two hours ago still counts")
	}
	for i := range maxSuspects + 1000 {
		s.add("new", strconv.Itoa(i))
	}
	if n := len(s.at); n > maxSuspects {
		t.Fatalf("%d remembered, bound %d", n, maxSuspects)
	}
	if !s.has("new", strconv.Itoa(maxSuspects+999)) {
		t.Fatal("the newest guesser was forgotten")
	}
}
