// Package netns builds the chaos harness's network: one Linux network
// namespace per node, each joined to a bridge in the root namespace by a veth
// pair, with addresses from a private range that exist only on these
// interfaces. Clients in the root namespace reach every node through the
// bridge. Faults between nodes (partitions, packet loss) are nftables rules
// on the bridge's forward hook, so they never touch client traffic.
//
// It drives the ip(8) and nft(8) commands; everything it creates carries the
// configured prefix, so Clean can remove the leftovers of a crashed run.
package netns

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// ErrNotRoot is returned by New when the process cannot manage namespaces.
var ErrNotRoot = errors.New("network namespaces and nftables need root (run as root, or with CAP_NET_ADMIN and CAP_SYS_ADMIN)")

// Config describes the network.
type Config struct {
	// Prefix names every namespace, interface and nftables table made here
	// (at most 6 characters: Linux interface names are short). Default "lkj".
	Prefix string
	// Nodes is how many node namespaces to make.
	Nodes int
	// Subnet is a private /24 for the bridge (.1) and the nodes (.11 up).
	// Default 10.77.0.0/24.
	Subnet netip.Prefix
}

// Env is a built network.
type Env struct {
	cfg    Config
	bridge string

	mu    sync.Mutex
	drops map[[2]int]bool // (from, to) node pairs whose packets are dropped
	lossy map[[2]int]bool // pairs with random loss
	lossP int             // percent of lossy packets dropped
}

// New checks the configuration; Setup builds the network.
func New(cfg Config) (*Env, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "lkj"
	}
	if len(cfg.Prefix) > 6 {
		return nil, fmt.Errorf("prefix %q: at most 6 characters", cfg.Prefix)
	}
	if !cfg.Subnet.IsValid() {
		cfg.Subnet = netip.MustParsePrefix("10.77.0.0/24")
	}
	if cfg.Subnet.Bits() != 24 || !cfg.Subnet.Addr().Is4() || !cfg.Subnet.Addr().IsPrivate() {
		return nil, fmt.Errorf("subnet %s: want a private IPv4 /24", cfg.Subnet)
	}
	if cfg.Nodes < 1 || cfg.Nodes > 200 {
		return nil, fmt.Errorf("nodes = %d: want 1 to 200", cfg.Nodes)
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s(8) not found: install iproute2 and nftables: %w", tool, err)
		}
	}
	return &Env{cfg: cfg, bridge: cfg.Prefix + "br0", drops: map[[2]int]bool{}, lossy: map[[2]int]bool{}}, nil
}

// Namespace is the name of node i's namespace (i from 0).
func (e *Env) Namespace(i int) string { return fmt.Sprintf("%s-n%d", e.cfg.Prefix, i+1) }

// NodeIP is node i's address (i from 0).
func (e *Env) NodeIP(i int) netip.Addr {
	b := e.cfg.Subnet.Addr().As4()
	b[3] = byte(11 + i)
	return netip.AddrFrom4(b)
}

// HostIP is the bridge's address in the root namespace, where clients live.
func (e *Env) HostIP() netip.Addr {
	b := e.cfg.Subnet.Addr().As4()
	b[3] = 1
	return netip.AddrFrom4(b)
}

// AttackerIP is a second address of the bridge in the root namespace, for
// traffic that must not come from the clients' address (the flood fault's:
// per-client limits would otherwise fall on the clients too).
func (e *Env) AttackerIP() netip.Addr {
	b := e.cfg.Subnet.Addr().As4()
	b[3] = 2
	return netip.AddrFrom4(b)
}

// Command returns a command that runs name with args inside node i's
// namespace. ip-netns-exec execs the program in place, so the command's PID
// is the program's own: signals sent to it reach the program.
func (e *Env) Command(i int, name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", e.Namespace(i), name}, args...)...)
}

func (e *Env) table() string { return e.cfg.Prefix + "_chaos" }

// Setup builds the namespaces, the bridge and the veth pairs, and installs
// the (empty) fault table. On error it removes what it made.
func (e *Env) Setup(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			_ = e.Teardown(context.WithoutCancel(ctx))
		}
	}()
	// Leftovers of a crashed run with the same prefix would clash.
	if err := Clean(ctx, e.cfg.Prefix); err != nil {
		return err
	}
	host := e.HostIP().String() + "/24"
	steps := [][]string{
		{"link", "add", e.bridge, "type", "bridge"},
		{"addr", "add", host, "dev", e.bridge},
		{"addr", "add", e.AttackerIP().String() + "/24", "dev", e.bridge},
		{"link", "set", e.bridge, "up"},
	}
	for i := range e.cfg.Nodes {
		ns, veth := e.Namespace(i), fmt.Sprintf("%sv%d", e.cfg.Prefix, i+1)
		steps = append(steps,
			[]string{"netns", "add", ns},
			[]string{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"link", "set", veth, "master", e.bridge},
			[]string{"link", "set", veth, "up"},
			[]string{"-n", ns, "addr", "add", e.NodeIP(i).String() + "/24", "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"},
			[]string{"-n", ns, "link", "set", "lo", "up"},
		)
	}
	for _, s := range steps {
		if err := run(ctx, nil, "ip", s...); err != nil {
			return err
		}
	}
	return e.apply(ctx)
}

// Teardown removes the fault table, the namespaces and the bridge; it goes
// on past errors and reports the first.
func (e *Env) Teardown(ctx context.Context) error {
	return Clean(ctx, e.cfg.Prefix)
}

// Clean removes every namespace, interface and nftables table whose name
// starts with prefix: what a run with that prefix made. A harness that was
// itself killed leaves its nodes running inside those namespaces; Clean
// ends them (SIGKILL, by the PIDs ip-netns-pids reports for the namespace)
// before deleting it. Nothing outside the prefix's namespaces is touched.
func Clean(ctx context.Context, prefix string) error {
	var first error
	note := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	if out, err := output(ctx, "nft", "list", "tables"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line) // "table bridge lkj_chaos"
			if len(f) == 3 && f[0] == "table" && f[2] == prefix+"_chaos" {
				note(run(ctx, nil, "nft", "delete", "table", f[1], f[2]))
			}
		}
	}
	if out, err := output(ctx, "ip", "-o", "link", "show"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line) // "12: lkjv1@if2: <...>"
			if len(f) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if strings.HasPrefix(name, prefix+"v") || name == prefix+"br0" {
				note(run(ctx, nil, "ip", "link", "delete", name))
			}
		}
	}
	if out, err := output(ctx, "ip", "netns", "list"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) > 0 && strings.HasPrefix(f[0], prefix+"-n") {
				killInside(ctx, f[0])
				note(run(ctx, nil, "ip", "netns", "delete", f[0]))
			}
		}
	}
	return first
}

// Partition replaces the dropped pairs: for every i, node i drops packets
// from each node in grudge[i] (Jepsen's grudge). Pairs are one-way; a
// symmetric partition lists both directions.
func (e *Env) Partition(ctx context.Context, grudge map[int][]int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.drops = map[[2]int]bool{}
	for to, froms := range grudge {
		for _, from := range froms {
			if from != to {
				e.drops[[2]int{from, to}] = true
			}
		}
	}
	return e.applyLocked(ctx)
}

// Loss drops percent of the packets between every pair of distinct nodes
// in nodes (both ways).
func (e *Env) Loss(ctx context.Context, nodes []int, percent int) error {
	if percent < 1 || percent > 100 {
		return fmt.Errorf("loss of %d%%: want 1 to 100", percent)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lossy = map[[2]int]bool{}
	for _, a := range nodes {
		for _, b := range nodes {
			if a != b {
				e.lossy[[2]int{a, b}] = true
			}
		}
	}
	e.lossP = percent
	return e.applyLocked(ctx)
}

// Heal removes every partition and loss rule.
func (e *Env) Heal(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.drops, e.lossy = map[[2]int]bool{}, map[[2]int]bool{}
	return e.applyLocked(ctx)
}

// Dropped reads the fault table's counters: the packets dropped by the
// partition rule (cut) and by the loss rule (thin) since the table was last
// replaced, that is, since the fault in force began.
func (e *Env) Dropped(ctx context.Context) (cut, thin uint64, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	out, err := output(ctx, "nft", "-j", "list", "table", "bridge", e.table())
	if err != nil {
		return 0, 0, fmt.Errorf("nft list table %s: %w", e.table(), err)
	}
	return parseDropped([]byte(out))
}

// parseDropped sums the counters of nft's JSON listing of the fault table,
// per rule: the rule that matches @cut, and the one that matches @thin.
func parseDropped(listing []byte) (cut, thin uint64, err error) {
	var doc struct {
		Nftables []struct {
			Rule *struct {
				Expr []json.RawMessage `json:"expr"`
			} `json:"rule"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(listing, &doc); err != nil {
		return 0, 0, fmt.Errorf("nft listing: %w", err)
	}
	for _, item := range doc.Nftables {
		if item.Rule == nil {
			continue
		}
		var packets uint64
		var set string
		for _, x := range item.Rule.Expr {
			var c struct {
				Counter *struct {
					Packets uint64 `json:"packets"`
				} `json:"counter"`
			}
			if json.Unmarshal(x, &c) == nil && c.Counter != nil {
				packets += c.Counter.Packets
			}
			switch {
			case bytes.Contains(x, []byte(`"@cut"`)):
				set = "cut"
			case bytes.Contains(x, []byte(`"@thin"`)):
				set = "thin"
			}
		}
		switch set {
		case "cut":
			cut += packets
		case "thin":
			thin += packets
		}
	}
	return cut, thin, nil
}

func (e *Env) apply(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.applyLocked(ctx)
}

// applyLocked replaces the whole fault table in one nft transaction: a
// bridge-family table on the forward hook (node-to-node traffic only) with
// a set of (source, destination) pairs to drop and one of pairs to thin out.
func (e *Env) applyLocked(ctx context.Context) error {
	var b strings.Builder
	t := e.table()
	fmt.Fprintf(&b, "table bridge %s\ndelete table bridge %s\ntable bridge %s {\n", t, t, t)
	writeSet(&b, "cut", e.pairs(e.drops))
	writeSet(&b, "thin", e.pairs(e.lossy))
	b.WriteString("\tchain faults {\n\t\ttype filter hook forward priority 0; policy accept;\n")
	b.WriteString("\t\tip saddr . ip daddr @cut counter drop\n")
	switch {
	case e.lossP >= 100:
		b.WriteString("\t\tip saddr . ip daddr @thin counter drop\n")
	case e.lossP > 0:
		fmt.Fprintf(&b, "\t\tip saddr . ip daddr @thin numgen random mod 100 < %d counter drop\n", e.lossP)
	}
	b.WriteString("\t}\n}\n")
	return run(ctx, strings.NewReader(b.String()), "nft", "-f", "-")
}

func (e *Env) pairs(m map[[2]int]bool) []string {
	var out []string
	for p := range m {
		out = append(out, e.NodeIP(p[0]).String()+" . "+e.NodeIP(p[1]).String())
	}
	sort.Strings(out)
	return slices.Compact(out)
}

func writeSet(b *strings.Builder, name string, elems []string) {
	fmt.Fprintf(b, "\tset %s {\n\t\ttype ipv4_addr . ipv4_addr\n", name)
	if len(elems) > 0 {
		fmt.Fprintf(b, "\t\telements = { %s }\n", strings.Join(elems, ", "))
	}
	b.WriteString("\t}\n")
}

// killInside SIGKILLs the processes in namespace ns.
func killInside(ctx context.Context, ns string) {
	out, err := output(ctx, "ip", "netns", "pids", ns)
	if err != nil {
		return
	}
	for _, f := range strings.Fields(out) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func run(ctx context.Context, stdin *strings.Reader, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func output(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).Output()
	return string(out), err
}
