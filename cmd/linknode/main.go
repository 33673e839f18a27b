// Command linknode runs one node of a linkraft cluster. With no flags it is a
// complete single-node link shortener on :8080 with its data in
// ./linknode-data.
//
//	linknode [flags]        run a node
//	linknode version        print the version
//	linknode keygen         print a new cluster key (-o FILE writes it, mode 0600)
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
	"github.com/linkraft/linkraft/internal/clusterkey"
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
		case "keygen":
			return runKeygen(args[1:], stdout, stderr)
		case "repair-shard":
			return runRepair(args[1:], stdout, stderr)
		case "recover":
			return runRecover(args[1:], os.Stdin, stdout, stderr)
		case "status", "members", "shards", "remove", "keys":
			return runCLI(args[0], args[1:], os.LookupEnv, stdout, stderr)
		case "import", "export":
			return runTransfer(args[0], args[1:], os.LookupEnv, stdout, stderr)
		case "backup", "restore":
			return runBackup(args[0], args[1:], os.LookupEnv, stdout, stderr)
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
	faultExitOnce(ctx, cfg.DataDir)
	<-ctx.Done()
	stop() // a second signal kills the process the default way
	m.Logger().Info("shutting down")

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
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "linknode keygen: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	k, err := clusterkey.Generate()
	if err != nil {
		fmt.Fprintln(stderr, "linknode keygen:", err)
		return 1
	}
	if *out == "" {
		fmt.Fprintln(stdout, k.String())
		return 0
	}
	if err := clusterkey.Save(*out, k); err != nil {
		fmt.Fprintln(stderr, "linknode keygen:", err)
		return 1
	}
	fmt.Fprintf(stderr, "cluster key %s written to %s; give every node -cluster-key-file %s\n", k.ID(), *out, *out)
	return 0
}

// runRepair sets a damaged replica aside (cluster.RepairGroup).
func runRepair(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("linknode repair-shard", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", "linknode-data", "the stopped node's data dir")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
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
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
		return fmt.Sprintf("linknode %s %s", v, bi.GoVersion)
	}
	return "linknode " + v
}
