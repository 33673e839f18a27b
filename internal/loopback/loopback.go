// Package loopback hands tests loopback addresses for processes they start.
//
// Asking the kernel for port 0, closing the listener and handing the port to
// another process races with every outgoing connection on the machine: the
// kernel draws their local ports from the same ephemeral range, so a client
// in a parallel test package can take the port before the child binds it
// ("bind: address already in use"). Ports handed out
// here come from below the ephemeral range instead, where the kernel never
// assigns on its own, and are checked free for both TCP and UDP (memberlist
// binds both).
package loopback

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// lowestPort is the bottom of the range handed out; well clear of the
// well-known ports.
const lowestPort = 10000

// ephemeralLow reads the bottom of the kernel's ephemeral port range,
// falling back to the Linux default.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				return n
			}
		}
	}
	return 32768
}

// Addr returns "127.0.0.1:port" for a port below the ephemeral range whose
// TCP and UDP sockets were both free a moment ago.
func Addr(tb testing.TB) string {
	tb.Helper()
	high := ephemeralLow()
	if high-lowestPort < 1000 {
		tb.Fatalf("loopback: ephemeral range starts at %d, leaving no room below it", high)
	}
	for i := 0; i < 200; i++ {
		addr := fmt.Sprintf("127.0.0.1:%d", lowestPort+rand.IntN(high-lowestPort))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		pc, err := net.ListenPacket("udp", addr)
		ln.Close()
		if err != nil {
			continue
		}
		pc.Close()
		return addr
	}
	tb.Fatal("loopback: no free port below the ephemeral range")
	return ""
}
