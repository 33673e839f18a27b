package netid

import (
	"net"
	"testing"
)

// TestOfAddr: IPv4 by address (mapped too), IPv6 by /64 with its zone
// dropped, a Unix address none.
func TestOfAddr(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"192.0.2.7:80":                  "192.0.2.7",
		"[::ffff:192.0.2.7]:80":         "192.0.2.7",
		"[2001:db8:1:2:aaaa::1]:443":    "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff:1:2:3]:443": "2001:db8:1:2::/64",
		"[fe80::1%eth0]:7000":           "fe80::/64",
	} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		p, ok := OfAddr(a)
		if got := Key(p); !ok || got != want {
			t.Errorf("%s: %q, %v; want %q", addr, got, ok, want)
		}
	}
	if _, ok := OfAddr(&net.UnixAddr{Name: "@x", Net: "unix"}); ok {
		t.Error("a unix address has a client")
	}
}
