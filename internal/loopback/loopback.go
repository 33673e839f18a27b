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
//
// Test binaries of several packages draw from that range at once, and a
// port is only checked, not held, until its process binds it. So each test
// process draws from its own slice of the range (by process ID), and never
// hands out the same port twice: two processes collide only when their
// slices are the same and then one time in thousands.
package loopback

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// slices is how many parts the range is cut into, one per test process
// (by process ID modulo slices).
const slices = 8

// handedOut holds the ports this process has given out; a test helper's
// memory, shared by the tests of one binary.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

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
	span := (high - lowestPort) / slices
	base := lowestPort + (os.Getpid()%slices)*span
	handedOut.Lock()
	defer handedOut.Unlock()
	for i := 0; i < 200; i++ {
		port := base + rand.IntN(span)
		if handedOut.ports[port] {
			continue
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
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
		handedOut.ports[port] = true
		return addr
	}
	tb.Fatal("loopback: no free port below the ephemeral range")
	return ""
}
