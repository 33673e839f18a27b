package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/linkraft/linkraft/cluster"
)

// cliCommands are the subcommands that talk to a running node over HTTP.
var cliCommands = map[string]string{
	"status":  "the node's view of the cluster: IDs, members, shards and their leaders",
	"members": "the nodes of the cluster and their gossip status",
	"shards":  "every shard: leader, replicas, Raft indexes, links",
	"remove":  "remove a node (by ID) from the cluster for good: linknode remove [-addr A] ID",
}

// runCLI runs a subcommand against -addr (default the local node).
func runCLI(name string, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("linknode "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := "http://127.0.0.1:8080"
	if v, ok := lookupEnv("LINKNODE_ADDR"); ok {
		def = v
	}
	addr := fs.String("addr", def, "HTTP address of any node (env LINKNODE_ADDR)")
	output := fs.String("o", "table", "output: table or json")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *output != "table" && *output != "json" {
		fmt.Fprintln(stderr, "linknode: -o must be table or json")
		return 2
	}
	base := strings.TrimRight(*addr, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if name == "remove" {
		if fs.NArg() != 1 {
			fmt.Fprintln(stderr, "usage: linknode remove [-addr A] NODE-ID")
			return 2
		}
		status, body, err := adminCall(ctx, http.MethodDelete, base+"/admin/v1/nodes/"+fs.Arg(0))
		if err != nil {
			fmt.Fprintln(stderr, "linknode:", err)
			return 1
		}
		if status != http.StatusNoContent {
			fmt.Fprintf(stderr, "linknode: remove %s: %d %s\n", fs.Arg(0), status, body)
			return 1
		}
		fmt.Fprintf(stdout, "node %s removed\n", fs.Arg(0))
		return 0
	}
	status, body, err := adminCall(ctx, http.MethodGet, base+"/admin/v1/cluster")
	if err != nil {
		fmt.Fprintln(stderr, "linknode:", err)
		return 1
	}
	if status != http.StatusOK {
		fmt.Fprintf(stderr, "linknode: %s answered %d: %s\n", base, status, body)
		return 1
	}
	var st cluster.Status
	if err := json.Unmarshal(body, &st); err != nil {
		fmt.Fprintln(stderr, "linknode: cannot read the cluster status:", err)
		return 1
	}
	if *output == "json" {
		var v any
		switch name {
		case "members":
			v = st.Nodes
		case "shards":
			v = st.Shards
		default:
			v = st
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v)
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	switch name {
	case "members":
		printMembers(tw, st)
	case "shards":
		printShards(tw, st)
	default:
		fmt.Fprintf(tw, "node\t%s\ncluster\t%s\ncode mode\t%s\nmembers\t%d\nmeta leader\t%s\nmeta voters+followers\t%s\n\n",
			st.NodeID, st.ClusterID, st.CodeMode, len(st.Nodes), st.Meta.Leader, strings.Join(st.Meta.Replicas, ","))
		printMembers(tw, st)
		fmt.Fprintln(tw)
		printShards(tw, st)
	}
	return 0
}

func printMembers(w io.Writer, st cluster.Status) {
	fmt.Fprintln(w, "ID\tSTATUS\tHTTP\tRAFT\tGOSSIP")
	for _, n := range st.Nodes {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", n.ID, n.Status, n.HTTPAddr, n.RaftAddr, n.GossipAddr)
	}
}

func printShards(w io.Writer, st cluster.Status) {
	fmt.Fprintf(w, "SHARD\tLEADER\tREPLICAS\tSTATE@%s\tAPPLIED\tCOMMIT\tLAST CONTACT\tLINKS\n", st.NodeID)
	for _, s := range st.Shards {
		links := "-"
		if s.Links != nil {
			links = fmt.Sprint(*s.Links)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", s.ID, s.Leader, strings.Join(s.Replicas, ","), s.State,
			s.AppliedIndex, s.CommitIndex, s.LastContact, links)
	}
}

// adminCall sends one request to a node's admin API.
func adminCall(ctx context.Context, method, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}
