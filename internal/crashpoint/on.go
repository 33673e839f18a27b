//go:build jepsencrash

package crashpoint

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
)

// Built reports whether this binary has the crash points.
const Built = true

// armed is the armed point, or "". Process state of this kind exists only
// in jepsencrash builds (the harness's).
var armed atomic.Pointer[string]

// Hit crashes the process if name is the armed point: one line to stderr,
// then SIGKILL to itself (nothing deferred runs, nothing is flushed).
func Hit(name string) {
	p := armed.Load()
	if p == nil || *p != name {
		return
	}
	fmt.Fprintf(os.Stderr, "jepsen crash point %s reached: SIGKILL\n", name)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}

// Listen arms the point named in the file $LINKRAFT_CRASH_ARM on every
// SIGUSR2 (an empty file disarms; an unknown name is logged and disarms).
func Listen(log *slog.Logger) {
	path := os.Getenv(Env)
	if path == "" {
		return
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR2)
	go func() {
		for range ch {
			arm(log, path)
		}
	}()
}

// arm reads the arming file at path and arms what it names.
func arm(log *slog.Logger, path string) {
	b, err := os.ReadFile(path)
	name := strings.TrimSpace(string(b))
	switch {
	case err != nil:
		log.Warn("crash point not armed", "file", path, "err", err)
		armed.Store(nil)
	case name == "":
		armed.Store(nil)
		log.Info("crash point disarmed")
	case !slices.Contains(Points, name):
		log.Warn("crash point not armed: unknown point", "point", name)
		armed.Store(nil)
	default:
		armed.Store(&name)
		log.Info("crash point armed", "point", name)
	}
}
