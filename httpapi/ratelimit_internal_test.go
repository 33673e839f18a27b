package httpapi

import (
	"fmt"
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
