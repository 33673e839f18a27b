// Package testkit holds what the tests of several packages share: a
// peer port on loopback, deadlines tied to the test, and polling for a
// condition. It is imported only by _test files.
package testkit

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/linkraft/linkraft/transport"
)

// Mux starts a peer-port multiplexer on a free loopback port, closed when
// the test ends.
func Mux(tb testing.TB) *transport.Mux {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	m, err := transport.New(transport.Config{Listener: ln})
	if err != nil {
		tb.Fatal(err)
	}
	go m.Serve(context.Background())
	tb.Cleanup(func() { m.Close() })
	return m
}

// Context returns a context that ends after d or when the test ends.
func Context(tb testing.TB, d time.Duration) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// WaitFor polls cond every 10 ms until it holds, and fails the test with
// what if d passes first. Tests wait on conditions, never on sleeps.
func WaitFor(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	Eventually(tb, d, func() error {
		if cond() {
			return nil
		}
		return fmt.Errorf("waiting for %s", what)
	})
}

// Eventually polls check every 10 ms until it returns nil, and fails the
// test with check's last error if d passes first.
func Eventually(tb testing.TB, d time.Duration, check func() error) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v: %v", d, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
