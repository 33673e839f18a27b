package loopback

import (
	"net"
	"strconv"
	"testing"
)

func TestAddrIsBelowTheEphemeralRangeAndBindable(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 20; i++ {
		a := Addr(t)
		_, p, err := net.SplitHostPort(a)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(p)
		if port < lowestPort || port >= ephemeralLow() {
			t.Fatalf("port %d outside [%d, %d)", port, lowestPort, ephemeralLow())
		}
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("%s not bindable: %v", a, err)
		}
		ln.Close()
		seen[a] = true
	}
	if len(seen) != 20 {
		t.Fatalf("20 draws gave %d distinct addresses: a port was handed out twice", len(seen))
	}
}
