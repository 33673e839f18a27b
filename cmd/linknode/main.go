// Command linknode runs one node of a linkraft cluster. With no flags it is a
// complete single-node link shortener on :8080 with its data in
// ./linknode-data.
//
//	linknode [serve] [flags] run a node (-config FILE: flag values from a TOML or YAML file)
//	linknode config print   every flag's effective value and where it came from
//	linknode version        print the version
//	linknode keygen         print a new cluster key (-o FILE writes it, mode 0600; -keep keeps an existing one)
//	linknode probe          exit 0 if a node's /readyz answers 200 (the image's HEALTHCHECK)
//	linknode repair-shard N set a damaged replica of shard N (or meta) aside; the node must be stopped
//	linknode status         the cluster as a node sees it (-addr, -o json)
//	linknode members        the nodes of the cluster
//	linknode shards         every shard: leader, replicas, indexes
//	linknode remove ID      remove a node from the cluster for good
//	linknode backup -o FILE the whole cluster to one file
//	linknode restore FILE   a backup into a new cluster
//	linknode recover -peers n1[,n2] rewrite a stopped survivor's groups to the survivors after a majority is lost
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/internal/atomicfile"
	"github.com/linkraft/linkraft/internal/clusterkey"
	"github.com/linkraft/linkraft/internal/crashpoint"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without os.Exit, for tests.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "version", "-version", "--version":
			fmt.Fprintln(stdout, versionString())
			return 0
		case "help", "--help":
			printHelp(stdout)
			return 0
		case "keygen":
			return runKeygen(args[1:], stdout, stderr)
		case "repair-shard":
			return runRepair(args[1:], stdout, stderr)
		case "recover":
			return runRecover(args[1:], os.Stdin, stdout, stderr)
		case "probe":
			return runProbe(args[1:], stderr)
		case "completion":
			return runCompletion(args[1:], stdout, stderr)
		case "status", "members", "shards", "remove", "drain", "keys":
			return runCLI(args[0], args[1:], os.LookupEnv, stdout, stderr)
		case "import", "export":
			return runTransfer(args[0], args[1:], os.LookupEnv, stdout, stderr)
		case "backup", "restore":
			return runBackup(args[0], args[1:], os.LookupEnv, stdout, stderr)
		case "config":
			return runConfig(args[1:], os.LookupEnv, stdout, stderr)
		case "serve":
			args = args[1:]
		}
	}
	cfg, err := ParseFlags(args, os.LookupEnv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "linknode:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	m := NewMain(cfg, stderr)
	crashpoint.Listen(m.Logger()) // the chaos harness's crash points (jepsencrash builds only)
	// go-metrics is process-global: the process bridges it, once (a Main
	// started in-process leaves it alone).
	if err := m.metrics.InstallRaftMetrics(); err != nil {
		m.Logger().Error("start failed", "err", err)
		return 1
	}
	if err := m.Run(ctx); err != nil {
		m.Logger().Error("start failed", "err", err)
		_ = m.Close()
		return 1
	}
	if err := sdNotify(os.LookupEnv, "READY=1"); err != nil {
		m.Logger().Warn("telling the service manager the node is ready", "err", err)
	}
	faultExitOnce(ctx, cfg.DataDir)
	<-ctx.Done()
	stop() // a second signal kills the process the default way
	m.Logger().Info("shutting down")
	_ = sdNotify(os.LookupEnv, "STOPPING=1")

	// Everything must be down within ShutdownTimeout; if Close hangs, exit
	// anyway (the data is safe: acknowledged writes are on disk).
	done := make(chan error, 1)
	go func() { done <- m.Close() }()
	select {
	case err := <-done:
		if err != nil {
			m.Logger().Error("shutdown", "err", err)
			return 1
		}
		m.Logger().Info("stopped")
		return 0
	case <-time.After(cfg.ShutdownTimeout):
		// Where it hangs is what an operator needs to know: every
		// goroutine's stack goes to the log after the line.
		m.Logger().Error("shutdown timed out; exiting", "timeout", cfg.ShutdownTimeout)
		_ = pprof.Lookup("goroutine").WriteTo(stderr, 2)
		return 1
	}
}

// runKeygen prints a new cluster key, or writes it to -o FILE (mode 0600,
// never over an existing file).
func runKeygen(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("linknode keygen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "write the key to this file (mode 0600) instead of printing it")
	keep := fs.Bool("keep", false, "with -o: keep the files that exist already and exit 0 (a container's first-start step)")
	adminOut := fs.String("admin-o", "", "also write a new first admin API key to this file (mode 0600), for -admin-key-file")
	if code, done := parseArgs(fs, args); done {
		return code
	}
	if fs.NArg() > 0 || (*out == "" && (*keep || *adminOut != "")) {
		fmt.Fprintln(stderr, "usage: linknode keygen [-o FILE [-keep] [-admin-o FILE]]")
		return 2
	}
	if *out == "" {
		k, err := clusterkey.Generate()
		if err != nil {
			fmt.Fprintln(stderr, "linknode keygen:", err)
			return 1
		}
		fmt.Fprintln(stdout, k.String())
		return 0
	}
	if !*keep || !fileExists(*out) {
		k, err := clusterkey.Generate()
		if err == nil {
			err = clusterkey.Save(*out, k)
		}
		if err != nil {
			fmt.Fprintln(stderr, "linknode keygen:", err)
			return 1
		}
		fmt.Fprintf(stderr, "cluster key %s written to %s; give every node -cluster-key-file %s\n", k.ID(), *out, *out)
	}
	if *adminOut != "" && (!*keep || !fileExists(*adminOut)) {
		secret, err := apikey.NewSecret()
		if err == nil {
			err = atomicfile.Create(*adminOut, []byte(secret+"\n"), 0o600)
		}
		if err != nil {
			fmt.Fprintln(stderr, "linknode keygen:", err)
			return 1
		}
		fmt.Fprintf(stderr, "admin API key written to %s; give the nodes -admin-key-file %s\n", *adminOut, *adminOut)
	}
	return 0
}

// runRepair sets a damaged replica aside (cluster.RepairGroup).
func runRepair(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("linknode repair-shard", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", "linknode-data", "the stopped node's data dir")
	if code, done := parseArgs(fs, args); done {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: linknode repair-shard [-data-dir D] SHARD|meta")
		return 2
	}
	rep, err := cluster.RepairGroup(*dataDir, fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "linknode repair-shard:", err)
		return 1
	}
	if rep.Alone {
		fmt.Fprintf(stdout, "shard %s had no other replica: its whole group (state, snapshots, Raft log) moved to %s.\n"+
			"Start the node: it starts the shard anew, empty, and serves. Its links are gone from the cluster; to bring them back,\n"+
			"restore your last backup with linknode restore -resume FILE (links already there are kept).\n", fs.Arg(0), rep.Aside)
		return 0
	}
	fmt.Fprintf(stdout, "group %s: state and snapshots moved to %s, log emptied (term and vote kept).\nStart the node: it catches up from the group's leader.\n", fs.Arg(0), rep.Aside)
	return 0
}

func versionString() string {
	v := version
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "linknode " + v
	}
	if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version // go install of a tagged module version
	}
	var commit, dirty string
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision" && len(s.Value) >= 12:
			commit = s.Value[:12]
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = ", modified"
		}
	}
	if commit != "" {
		v += " (commit " + commit + dirty + ")"
	}
	return fmt.Sprintf("linknode %s %s", v, bi.GoVersion)
}
