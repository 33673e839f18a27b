package netns

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The test binary doubles as a helper run inside a namespace:
// NETNS_HELPER=listen:ADDR serves TCP; NETNS_HELPER=dial:ADDR connects once.
func TestMain(m *testing.M) {
	if h := os.Getenv("NETNS_HELPER"); h != "" {
		mode, addr, _ := strings.Cut(h, ":")
		switch mode {
		case "listen":
			l, err := net.Listen("tcp", addr)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(3)
			}
			fmt.Println("ready")
			for {
				c, err := l.Accept()
				if err != nil {
					os.Exit(0)
				}
				_, _ = c.Write([]byte("hi"))
				_ = c.Close()
			}
		case "dial":
			if dial(addr) != nil {
				os.Exit(1)
			}
			os.Exit(0)
		}
		os.Exit(2)
	}
	os.Exit(m.Run())
}

func dial(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 700*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(700 * time.Millisecond))
	buf := make([]byte, 2)
	_, err = c.Read(buf)
	return err
}

func TestPartitionAndLossRules(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CI runs as root)")
	}
	ctx := context.Background()
	e, err := New(Config{Prefix: "lkt", Nodes: 3, Subnet: netip.MustParsePrefix("10.78.0.0/24")})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Teardown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	addr := func(i int) string { return net.JoinHostPort(e.NodeIP(i).String(), "9999") }
	// A listener in every namespace.
	exited := make([]chan struct{}, 3)
	for i := range 3 {
		cmd := e.Command(i, self)
		cmd.Env = append(os.Environ(), "NETNS_HELPER=listen:"+addr(i))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited[i] = make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited[i]) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited[i] })
		buf := make([]byte, 6)
		if _, err := out.Read(buf); err != nil || string(buf[:5]) != "ready" {
			t.Fatalf("listener %d: %q %v", i, buf, err)
		}
	}
	canDial := func(from, to int) bool {
		cmd := e.Command(from, self)
		cmd.Env = append(os.Environ(), "NETNS_HELPER=dial:"+addr(to))
		return cmd.Run() == nil
	}
	if !canDial(0, 1) || !canDial(1, 2) {
		t.Fatal("nodes cannot reach each other before any fault")
	}
	// n1 and n2 cut off from each other; n3 and the host still reach both.
	if err := e.Partition(ctx, map[int][]int{0: {1}, 1: {0}}); err != nil {
		t.Fatal(err)
	}
	if cut, thin, err := e.Dropped(ctx); err != nil || cut != 0 || thin != 0 {
		t.Fatalf("counters of a partition nobody crossed yet: %d %d %v", cut, thin, err)
	}
	if canDial(0, 1) || canDial(1, 0) {
		t.Fatal("n1 and n2 still talk through the partition")
	}
	if cut, thin, err := e.Dropped(ctx); err != nil || cut == 0 || thin != 0 {
		t.Fatalf("the partition's counters after refused dials: cut %d thin %d (%v)", cut, thin, err)
	}
	if !canDial(0, 2) || !canDial(2, 1) {
		t.Fatal("the partition cut more than it should")
	}
	for i := range 3 {
		if err := dial(addr(i)); err != nil {
			t.Fatalf("client in the root namespace cannot reach n%d: %v", i+1, err)
		}
	}
	// Full loss between all nodes is a partition too; heal restores all.
	if err := e.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if !canDial(0, 1) {
		t.Fatal("heal did not restore n1 -> n2")
	}
	if err := e.Loss(ctx, []int{0, 1, 2}, 100); err != nil {
		t.Fatal(err)
	}
	if canDial(0, 1) {
		t.Fatal("100% loss let a connection through")
	}
	if cut, thin, err := e.Dropped(ctx); err != nil || cut != 0 || thin == 0 {
		t.Fatalf("loss counters: cut %d thin %d (%v)", cut, thin, err)
	}
	if err := e.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if !canDial(0, 1) || !canDial(2, 0) {
		t.Fatal("heal after loss did not restore traffic")
	}
	// Clean finds and removes everything with the prefix, and ends the
	// processes left inside (as after a harness that was killed).
	if err := Clean(ctx, "lkt"); err != nil {
		t.Fatal(err)
	}
	for i, ch := range exited {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("the process in namespace %d survived Clean", i)
		}
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), "lkt-n") {
		t.Fatalf("namespaces left after Clean: %s", out)
	}
}
