package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/linkraft/linkraft/cluster"
)

// recoverWarning is what linknode recover says before it changes anything.
const recoverWarning = `linknode recover rewrites every Raft group of the node in %s (meta and each shard it hosts)
to the nodes %s alone. Use it only when the other nodes are lost for good and the groups have no majority:
  - run it on every surviving node, with the same -peers, while all of them are stopped;
  - writes that only the lost nodes had are gone, and entries this node held but never saw committed are kept;
  - then start the survivors, remove each lost node (linknode remove ID) and add new nodes.
`

// runRecover is linknode recover: after a majority of the cluster is lost,
// it rewrites the stopped node's groups to the survivors, once the operator
// confirms (typing "recover", or -yes).
func runRecover(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("linknode recover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", "linknode-data", "the stopped node's data dir")
	peers := fs.String("peers", "", "the surviving nodes' IDs, comma-separated, this node's among them")
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	if code, done := parseArgs(fs, args); done {
		return code
	}
	var keep []string
	for p := range strings.SplitSeq(*peers, ",") {
		if p = strings.TrimSpace(p); p != "" {
			keep = append(keep, p)
		}
	}
	if len(keep) == 0 || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: linknode recover [-data-dir D] -peers ID[,ID...] [-yes]")
		return 2
	}
	fmt.Fprintf(stderr, recoverWarning, *dataDir, strings.Join(keep, ", "))
	if !*yes {
		fmt.Fprint(stderr, `Type "recover" to go on: `)
		line, _ := bufio.NewReader(stdin).ReadString('\n')
		if strings.TrimSpace(line) != "recover" {
			fmt.Fprintln(stderr, "linknode recover: not confirmed; nothing was changed")
			return 1
		}
	}
	groups, err := cluster.RecoverNode(*dataDir, keep)
	for _, g := range groups {
		fmt.Fprintf(stdout, "%s: now %s\n", g.Group, strings.Join(g.Servers, ", "))
	}
	if err != nil {
		fmt.Fprintln(stderr, "linknode recover:", err)
		return 1
	}
	fmt.Fprintln(stdout, "Start this node (and the other survivors), then remove each lost node: linknode remove ID.")
	return 0
}
