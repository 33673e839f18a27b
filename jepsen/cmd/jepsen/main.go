// Command jepsen runs linkraft's chaos tests.
//
//	jepsen test  [flags]   run a cluster under faults and check the history (root)
//	jepsen clean [-prefix] remove namespaces, interfaces and nftables tables a crashed run left
//	jepsen serve [-store]  browse the results over HTTP on 127.0.0.1
//	jepsen table DIR...    summarise runs as Markdown table rows
//
// Exit codes (Jepsen's): 0 valid, 1 invalid, 2 unknown, 254 bad arguments
// or not root, 255 harness error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	linkbugs "github.com/linkraft/linkraft/internal/bugs"
	"github.com/linkraft/linkraft/jepsen"
	"github.com/linkraft/linkraft/jepsen/checker"
	"github.com/linkraft/linkraft/jepsen/netns"
)

const (
	exitValid   = 0
	exitInvalid = 1
	exitUnknown = 2
	exitBadArgs = 254
	exitHarness = 255
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, `usage: jepsen test [flags]     run a chaos test (as root); jepsen test -h for flags
       jepsen clean [-prefix lkj] remove what a crashed run left behind
       jepsen serve [-store store] [-addr 127.0.0.1:8088]  browse results
       jepsen table RUN_DIR...     one Markdown row per run (for JEPSEN.md)`)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitBadArgs
	}
	switch args[0] {
	case "test":
		return test(ctx, args[1:], stdout, stderr)
	case "clean":
		fs := flag.NewFlagSet("clean", flag.ContinueOnError)
		fs.SetOutput(stderr)
		prefix := fs.String("prefix", "lkj", "name prefix of the run's namespaces and interfaces")
		if err := fs.Parse(args[1:]); err != nil {
			return exitBadArgs
		}
		if os.Geteuid() != 0 {
			fmt.Fprintln(stderr, "jepsen clean:", netns.ErrNotRoot)
			return exitBadArgs
		}
		if err := netns.Clean(ctx, *prefix); err != nil {
			fmt.Fprintln(stderr, "jepsen clean:", err)
			return exitHarness
		}
		fmt.Fprintf(stdout, "removed namespaces, interfaces and nftables tables named %s*\n", *prefix)
		return exitValid
	case "serve":
		return serve(ctx, args[1:], stdout, stderr)
	case "table":
		return table(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return exitValid
	}
	usage(stderr)
	return exitBadArgs
}

func test(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var opt jepsen.Options
	var bugs, nodeArgs string
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&opt.Name, "name", "linkraft", "test name (folder under the store)")
	fs.IntVar(&opt.Nodes, "nodes", 5, "cluster size")
	fs.IntVar(&opt.BootstrapExpect, "bootstrap-expect", 0, "the nodes' -bootstrap-expect (default -nodes); fewer, with -start-jitter, is the formation run")
	fs.DurationVar(&opt.StartJitter, "start-jitter", 0, "start the nodes in a random order, each after a random delay below this (default: in order)")
	fs.DurationVar(&opt.TimeLimit, "time-limit", time.Minute, "how long the workloads run")
	fs.IntVar(&opt.Concurrency, "concurrency", 0, "client workers per workload (default 2 per node)")
	fs.Float64Var(&opt.Rate, "rate", 200, "target operations per second, all workloads together")
	fs.StringVar(&opt.Nemesis, "nemesis", "all", "faults: groups partition, kill, pause, loss, hostile, disk, all, none, or single faults (comma-separated)")
	fs.DurationVar(&opt.NemesisInterval, "nemesis-interval", 10*time.Second, "time between faults, and each fault's length")
	fs.StringVar(&opt.NemesisFirst, "nemesis-first", "", "faults of the -nemesis list to inject first, in this order, before the random draws (comma-separated)")
	fs.StringVar(&opt.Workloads, "workload", "all", "workloads: register, set, unique-ids, ryw, or all (comma-separated)")
	fs.StringVar(&opt.Store, "store", "store", "results folder")
	fs.IntVar(&opt.OpsPerKey, "ops-per-key", 200, "register operations per code")
	fs.IntVar(&opt.PerKey, "per-key", 5, "register workers sharing one code (1 to 10)")
	fs.DurationVar(&opt.OpTimeout, "op-timeout", 3*time.Second, "client request timeout (a timeout is an indeterminate result)")
	fs.DurationVar(&opt.RecoveryTimeout, "recovery-timeout", 90*time.Second, "longest wait for the cluster to be ready, at start and after healing")
	fs.IntVar(&opt.LossPercent, "loss", 30, "percent of packets the loss fault drops")
	fs.Uint64Var(&opt.Seed, "seed", 0, "random seed for the schedule and operations (default: the clock)")
	fs.StringVar(&opt.Binary, "binary", "", "linknode binary to run (default: build ./cmd/linknode)")
	fs.StringVar(&opt.BuildTags, "tags", "", "build tags for linknode (jepsenbugs enables -bugs)")
	fs.BoolVar(&opt.Race, "race", false, "build linknode with the race detector")
	fs.StringVar(&bugs, "bugs", "", "deliberate faults to turn on (needs -tags jepsenbugs), comma-separated: "+strings.Join(linkbugs.All, ", "))
	fs.StringVar(&nodeArgs, "node-args", "", "extra linknode flags, space-separated (for example -fast-raft); not the ones the harness sets")
	fs.StringVar(&opt.Prefix, "prefix", "lkj", "name prefix of namespaces and interfaces")
	fs.Func("subnet", "private IPv4 /24 of the test network (default 10.77.0.0/24)", func(v string) (err error) {
		opt.Subnet, err = netip.ParsePrefix(v)
		return err
	})
	fs.BoolVar(&opt.KeepData, "keep-data", false, "keep node data folders of valid runs too")
	fs.BoolVar(&opt.Backup, "backup", true, "take a backup (linknode backup) halfway through the run and restore it into a fresh node after it (the backup checker)")
	if err := fs.Parse(args); err != nil {
		return exitBadArgs
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "jepsen test: unexpected arguments %q\n", fs.Args())
		return exitBadArgs
	}
	if bugs != "" {
		opt.Bugs = strings.Split(bugs, ",")
	}
	opt.NodeArgs = strings.Fields(nodeArgs)
	opt.Log = stderr
	if os.Geteuid() != 0 {
		fmt.Fprintln(stderr, "jepsen test:", netns.ErrNotRoot)
		return exitBadArgs
	}
	out, err := jepsen.Run(ctx, opt)
	if err != nil {
		fmt.Fprintln(stderr, "jepsen test:", err)
		if out != nil {
			fmt.Fprintln(stderr, "run folder:", out.Dir)
		}
		if errors.Is(err, jepsen.ErrBadOptions) {
			return exitBadArgs
		}
		return exitHarness
	}
	printSummary(stdout, out)
	switch out.Valid {
	case checker.Valid:
		return exitValid
	case checker.Invalid:
		return exitInvalid
	}
	return exitUnknown
}

func printSummary(w io.Writer, out *jepsen.Outcome) {
	fmt.Fprintln(w)
	for _, r := range out.Results {
		fmt.Fprintf(w, "%-11s valid=%-7s %s\n", r.Checker, r.Valid, r.Summary)
		for i, a := range r.Anomalies {
			if i == 5 {
				fmt.Fprintf(w, "%13s... %d more in results.json\n", "", r.AnomalyCount-5)
				break
			}
			fmt.Fprintf(w, "%13s%s: %s\n", "", a.Kind, a.Detail)
		}
	}
	var faults []string
	for f, n := range out.Faults {
		s := fmt.Sprintf("%s×%d", f, n.Injected)
		if n.Effective != n.Injected || n.NoTarget+n.Failed > 0 {
			s += fmt.Sprintf(" (%d effective, %d without target, %d failed)", n.Effective, n.NoTarget, n.Failed)
		}
		faults = append(faults, s)
	}
	sort.Strings(faults)
	fmt.Fprintf(w, "\n%d history entries; faults (all shown effective unless said): %s\n", out.Ops, strings.Join(faults, " "))
	switch out.Valid {
	case checker.Valid:
		fmt.Fprint(w, "Everything looks good! ヽ(‘ー`)ノ")
	case checker.Invalid:
		fmt.Fprint(w, "Analysis invalid! (ﾉಥ益ಥ）ﾉ ┻━┻")
	default:
		fmt.Fprint(w, "Errors occurred during analysis, but no anomalies found. ಠ~ಠ")
	}
	fmt.Fprintf(w, "  %s\n", out.Dir)
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	store := fs.String("store", "store", "results folder")
	addr := fs.String("addr", "127.0.0.1:8088", "listen address (keep it on loopback)")
	if err := fs.Parse(args); err != nil {
		return exitBadArgs
	}
	abs, err := filepath.Abs(*store)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitHarness
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(stderr, "jepsen serve:", err)
		return exitBadArgs
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(abs)), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	fmt.Fprintf(stdout, "serving %s at http://%s/ (latest run: http://%s/latest/)\n", abs, ln.Addr(), ln.Addr())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(stderr, "jepsen serve:", err)
		return exitHarness
	}
	return exitValid
}
