package testkit

import (
	"net"
	"testing"
	"time"
)

// DialFrom opens a TCP connection to addr from the loopback address from
// (127.0.0.x: each a client of its own to per-client limits), closed when
// the test ends.
func DialFrom(tb testing.TB, from, addr string) net.Conn {
	tb.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		tb.Fatalf("dial %s from %s: %v", addr, from, err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}
