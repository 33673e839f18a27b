//go:build jepsenbugs

package bugs

import (
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// The switched-on faults, read once, and per-fault call counters. Process
// state of this kind exists only in jepsenbugs builds (test binaries).
var (
	enabled = sync.OnceValue(func() []string { return strings.Split(os.Getenv(Env), ",") })
	calls   sync.Map // name -> *atomic.Uint64
)

// On reports whether the deliberate fault name is listed in $LINKRAFT_JEPSEN_BUGS.
func On(name string) bool { return slices.Contains(enabled(), name) }

func count(name string) uint64 {
	c, _ := calls.LoadOrStore(name, new(atomic.Uint64))
	return c.(*atomic.Uint64).Add(1)
}

// Once reports whether name is on and this is the first call of Once for it
// in this process.
func Once(name string) bool { return On(name) && count(name) == 1 }

// Every reports whether name is on and this is the nth, 2nth, 3nth... call
// of Every for it in this process.
func Every(name string, n uint64) bool { return On(name) && count(name)%n == 0 }
