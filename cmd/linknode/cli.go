package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/internal/status"
)

// commandGroups are linknode's subcommands, grouped as linknode help
// shows them.
var commandGroups = []struct {
	title    string
	commands [][2]string
}{
	{"The cluster, through any node's admin listener (-addr, admin key)", [][2]string{
		{"status", "the node's view of the cluster: IDs, members, shards and their leaders"},
		{"members", "the nodes of the cluster and their gossip status"},
		{"shards", "every shard: leader, replicas, Raft indexes, links"},
		{"keys", "API keys: keys create -name N -owner O [-scopes S] | keys list | keys revoke ID"},
		{"drain ID", "move a node's replicas to the other nodes before removing it (-cancel, -wait)"},
		{"remove ID", "remove a node from the cluster for good"},
		{"backup -o FILE", "the whole cluster (links, tombstones, clicks, keys, blocklist, ID leases) to one file"},
		{"restore FILE", "a backup into a new cluster (-resume: finish one that was cut short)"},
	}},
	{"Links, through any node's public listener (-url, a key with the scope)", [][2]string{
		{"import FILE", "links from linkraft CSV or NDJSON, or a Shlink, Kutt, YOURLS or Bitly export"},
		{"export", "your links as NDJSON or CSV (-format, -o FILE)"},
	}},
	{"A stopped node's files (-data-dir)", [][2]string{
		{"repair-shard N|meta", "set a damaged replica aside; it catches up from the leader"},
		{"recover -peers IDS", "after a majority is lost for good: rewrite every group to the survivors"},
	}},
	{"Other", [][2]string{
		{"serve", "run a node, as linknode [flags] does"},
		{"config print", "every node flag's effective value and its source: flag, env, -config file or default (-format toml)"},
		{"keygen", "a new cluster key (-o FILE, mode 0600)"},
		{"probe", "exit 0 if a node's /readyz answers 200 (-url)"},
		{"version", "the version, commit and Go version"},
		{"completion bash|zsh|fish", "a shell completion script (source <(linknode completion bash))"},
		{"help", "this text"},
	}},
}

// printHelp writes linknode's overview: how to run a node, and the
// subcommands.
func printHelp(w io.Writer) {
	fmt.Fprint(w, `linknode runs one node of a linkraft cluster. With no flags it is a whole single-node link
shortener on :8080, its data in ./linknode-data.

Usage:
  linknode [serve] [flags]       run a node (linknode -h lists every flag)
  linknode COMMAND [args]        an operator command (linknode COMMAND -h: its flags)

Running a node, the flags that matter first:
  -data-dir D  -http-addr :8080  -node-id ID  -join HOST:7946,...  -bootstrap-expect N
  -cluster-key-file FILE (linknode keygen -o FILE)  -advertise-host HOST  -public-url URL

`)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, g := range commandGroups {
		fmt.Fprintf(tw, "%s:\n", g.title)
		for _, c := range g.commands {
			fmt.Fprintf(tw, "  %s\t%s\n", c[0], c[1])
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "Every flag also reads LINKNODE_<FLAG> from the environment, and -config FILE reads flag values from a")
	fmt.Fprintln(w, "TOML or YAML file keyed by flag name (flag > environment > file > default; linknode config print shows them).")
}

// admin is a CLI's connection to a node's admin listener.
type admin struct {
	base, key string
	client    *http.Client
}

// maxAnswer bounds an admin answer the CLI reads (a cluster's status, the
// keys): a server that sends more is refused, not buffered.
const maxAnswer = 32 << 20

// errTooLarge is an answer over maxAnswer.
var errTooLarge = errors.New("the answer is too large")

// cliClient is the CLI's HTTP client. It follows no redirect: a key is
// sent to the address the operator gave and nowhere else, and a POST is
// never replayed as a GET.
func cliClient() *http.Client {
	return &http.Client{CheckRedirect: func(req *http.Request, _ []*http.Request) error { return redirectError(req.URL) }}
}

// redirectError names where a server redirects, by scheme and host: what
// the operator gives as the address instead.
func redirectError(to *url.URL) error {
	return fmt.Errorf("the server redirects to %s: give that address (scheme and host) instead", termSafe([]byte(to.Scheme+"://"+to.Host)))
}

// unsafeRune reports a rune that must not reach a terminal raw: a control
// character (C0, DEL, C1: terminal escapes) or a bidi override.
func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// readBounded reads r whole, or fails with errTooLarge past limit bytes.
func readBounded(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("%w (over %d MiB)", errTooLarge, limit>>20)
	}
	return b, err
}

// maxShown bounds the server text an error message repeats.
const maxShown = 4096

// termSafe is text a server sent, made safe to print on an operator's
// terminal: control characters (terminal escapes among them), bidi
// overrides and invalid UTF-8 are shown escaped rather than sent, and the
// text is cut at maxShown bytes.
func termSafe(b []byte) string {
	var sb strings.Builder
	for len(b) > 0 {
		if sb.Len() >= maxShown {
			sb.WriteString("…")
			break
		}
		r, size := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&sb, `\x%02x`, b[0])
		case unsafeRune(r):
			if r < 0x100 {
				fmt.Fprintf(&sb, `\x%02x`, r)
			} else {
				fmt.Fprintf(&sb, `\u%04x`, r)
			}
		default:
			sb.Write(b[:size])
		}
		b = b[size:]
	}
	return sb.String()
}

// cell is termSafe for a string field of an answer.
func cell(s string) string { return termSafe([]byte(s)) }

// runCLI runs a subcommand against a node's admin listener (-addr, default
// the local node's), with an admin key from -key, LINKNODE_KEY or
// <data-dir>/admin.key.
func runCLI(name string, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("linknode "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	ep := endpointFlags(fs, lookupEnv, false, "admin API key")
	output := fs.String("o", "table", "output: table or json")
	var keyName, keyOwner, keyScopes string
	var keyRate uint
	if name == "keys" {
		fs.StringVar(&keyName, "name", "", "keys create: the key's name")
		fs.StringVar(&keyOwner, "owner", "", "keys create: whose links the key manages")
		fs.StringVar(&keyScopes, "scopes", "links:read,links:write,stats:read", "keys create: comma-separated scopes (links:read, links:write, stats:read, admin)")
		fs.UintVar(&keyRate, "rate-limit", 0, "keys create: the key's own limit in requests per second (0: the nodes' -rate-limit)")
	}
	var drainCancel, drainWait bool
	var drainTimeout time.Duration
	if name == "drain" {
		fs.BoolVar(&drainCancel, "cancel", false, "call the drain off: the node takes replicas again")
		fs.BoolVar(&drainWait, "wait", true, "wait until the node hosts no replica, showing how many are left")
		fs.DurationVar(&drainTimeout, "timeout", 30*time.Minute, "with -wait: give up waiting after this long (the drain goes on)")
	}
	if code, done := parseArgs(fs, args); done {
		return code
	}
	if *output != "table" && *output != "json" {
		fmt.Fprintln(stderr, "linknode: -o must be table or json")
		return 2
	}
	base, key, ok := ep.connect(lookupEnv, stderr)
	if !ok {
		return 2
	}
	a := admin{base: base, key: key, client: cliClient()}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if name == "keys" {
		return a.keys(ctx, fs.Args(), cliKey{keyName, keyOwner, keyScopes, keyRate}, *output == "json", stdout, stderr)
	}
	adminCall := a.call
	if name == "drain" {
		if fs.NArg() != 1 {
			fmt.Fprintln(stderr, "usage: linknode drain [-addr A] [-cancel] [-wait=false] NODE-ID")
			return 2
		}
		return a.drain(fs.Arg(0), drainCancel, drainWait, drainTimeout, stdout, stderr)
	}
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
			fmt.Fprintf(stderr, "linknode: remove %s: %d %s\n", fs.Arg(0), status, termSafe(body))
			return 1
		}
		fmt.Fprintf(stdout, "node %s removed\n", fs.Arg(0))
		return 0
	}
	code, body, err := adminCall(ctx, http.MethodGet, base+"/admin/v1/cluster")
	if err != nil {
		fmt.Fprintln(stderr, "linknode:", err)
		return 1
	}
	if code != http.StatusOK {
		fmt.Fprintf(stderr, "linknode: %s answered %d: %s\n", base, code, termSafe(body))
		return 1
	}
	var st status.Cluster
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
		out, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			fmt.Fprintln(stderr, "linknode:", err)
			return 1
		}
		_, _ = stdout.Write(jsonTermSafe(out))
		fmt.Fprintln(stdout)
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
		fmt.Fprintf(tw, "node\t%s\ncluster\t%s\ncode mode\t%s\nfeature level\t%d (this node), %d (the cluster)\nmembers\t%d\nmeta leader\t%s\nmeta voters+followers\t%s\n\n",
			cell(st.NodeID), cell(st.ClusterID), cell(st.CodeMode), st.FeatureLevel, st.ClusterLevel, len(st.Nodes), cell(st.Meta.Leader), cell(strings.Join(st.Meta.Replicas, ",")))
		printMembers(tw, st)
		fmt.Fprintln(tw)
		printShards(tw, st)
	}
	return 0
}

func printMembers(w io.Writer, st status.Cluster) {
	fmt.Fprintln(w, "ID\tSTATUS\tLEVEL\tREPLICAS\tHTTP\tRAFT\tGOSSIP")
	for _, n := range st.Nodes {
		state := cell(n.Status)
		if n.Draining {
			state += ",draining"
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", cell(n.ID), state, n.Level, n.Replicas, cell(n.HTTPAddr), cell(n.RaftAddr), cell(n.GossipAddr))
	}
}

func printShards(w io.Writer, st status.Cluster) {
	fmt.Fprintf(w, "SHARD\tLEADER\tREPLICAS\tSTATE@%s\tAPPLIED\tCOMMIT\tLAST CONTACT\tLINKS\n", cell(st.NodeID))
	for _, s := range st.Shards {
		links := "-"
		if s.Links != nil {
			links = fmt.Sprint(*s.Links)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", cell(s.ID), cell(s.Leader), cell(strings.Join(s.Replicas, ",")), cell(s.State),
			s.AppliedIndex, s.CommitIndex, cell(s.LastContact), links)
	}
}

// endpoint is a subcommand's flags naming the node it calls and the key
// it calls with.
type endpoint struct {
	addr, key, dataDir *string
	public             bool
}

// endpointFlags adds to fs -addr, a node's admin listener (env
// LINKNODE_ADMIN_ADDR), or for a public one -url (env LINKNODE_URL);
// -key, described by keyHelp; and -data-dir.
func endpointFlags(fs *flag.FlagSet, lookupEnv func(string) (string, bool), public bool, keyHelp string) endpoint {
	e := endpoint{public: public}
	if public {
		def := "http://127.0.0.1:8080"
		if v, ok := lookupEnv("LINKNODE_URL"); ok {
			def = v
		}
		e.addr = fs.String("url", def, "public URL of any node (env LINKNODE_URL)")
	} else {
		def := "127.0.0.1:8081"
		if v, ok := lookupEnv("LINKNODE_ADMIN_ADDR"); ok {
			def = v
		}
		e.addr = fs.String("addr", def, "admin address of any node (env LINKNODE_ADMIN_ADDR)")
	}
	e.key = fs.String("key", "", keyHelp+" (default: env LINKNODE_KEY, else the file <data-dir>/admin.key)")
	e.dataDir = fs.String("data-dir", "linknode-data", "data dir whose admin.key to use when no key is given")
	return e
}

// connect returns the node's base URL and the key, after the flags are
// parsed; without a key it says so on stderr and returns false.
func (e endpoint) connect(lookupEnv func(string) (string, bool), stderr io.Writer) (base, key string, ok bool) {
	base = strings.TrimRight(*e.addr, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	key, err := resolveKey(*e.key, *e.dataDir, lookupEnv)
	if err != nil {
		what := "admin key"
		if e.public {
			what = "API key"
		}
		fmt.Fprintf(stderr, "linknode: no %s: give -key, set LINKNODE_KEY, or run where -data-dir holds admin.key: %v\n", what, err)
		return "", "", false
	}
	return base, key, true
}

// resolveKey is the API key a command uses: flag, else LINKNODE_KEY, else
// <dataDir>/admin.key.
func resolveKey(flag, dataDir string, lookupEnv func(string) (string, bool)) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if v, ok := lookupEnv("LINKNODE_KEY"); ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v), nil
	}
	return apikey.LoadSecret(filepath.Join(dataDir, "admin.key"))
}

// call sends one request to the admin listener with the admin key.
func (a admin) call(ctx context.Context, method, url string) (int, []byte, error) {
	return a.callBody(ctx, method, url, nil)
}

func (a admin) callBody(ctx context.Context, method, url string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := readBounded(resp.Body, maxAnswer)
	return resp.StatusCode, out, err
}

// drainState is the answer of /admin/v1/nodes/{id}/drain.
type drainState struct {
	Draining bool `json:"draining"`
	Replicas int  `json:"replicas"`
}

// drain starts (or with cancel calls off) a node's drain and, with wait,
// polls until the node hosts no replica, printing each new count.
func (a admin) drain(id string, cancel, wait bool, timeout time.Duration, stdout, stderr io.Writer) int {
	ctx, stop := context.WithTimeout(context.Background(), timeout)
	defer stop()
	u := a.base + "/admin/v1/nodes/" + url.PathEscape(id) + "/drain"
	method := http.MethodPost
	if cancel {
		method = http.MethodDelete
	}
	ask := func(method string) (drainState, bool) {
		var st drainState
		cctx, done := context.WithTimeout(ctx, 20*time.Second)
		defer done()
		code, body, err := a.call(cctx, method, u)
		if err != nil {
			fmt.Fprintln(stderr, "linknode:", err)
			return st, false
		}
		if code != http.StatusOK {
			fmt.Fprintf(stderr, "linknode: drain %s: %d %s\n", cell(id), code, termSafe(body))
			return st, false
		}
		if err := json.Unmarshal(body, &st); err != nil {
			fmt.Fprintln(stderr, "linknode: cannot read the answer:", err)
			return st, false
		}
		return st, true
	}
	st, ok := ask(method)
	if !ok {
		return 1
	}
	if cancel {
		fmt.Fprintf(stdout, "node %s no longer draining (%d replicas)\n", cell(id), st.Replicas)
		return 0
	}
	fmt.Fprintf(stdout, "node %s draining: %d replicas to move\n", cell(id), st.Replicas)
	if !wait {
		return 0
	}
	last := st.Replicas
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for st.Replicas > 0 {
		select {
		case <-ctx.Done():
			fmt.Fprintf(stderr, "linknode: %s still hosts %d replicas after %s; the drain goes on (linknode drain %s shows it)\n", cell(id), st.Replicas, timeout, cell(id))
			return 1
		case <-t.C:
		}
		if st, ok = ask(http.MethodGet); !ok {
			return 1
		}
		if !st.Draining {
			fmt.Fprintf(stderr, "linknode: the drain of %s was called off\n", cell(id))
			return 1
		}
		if st.Replicas != last {
			fmt.Fprintf(stdout, "%d replicas left\n", st.Replicas)
			last = st.Replicas
		}
	}
	fmt.Fprintf(stdout, "node %s is drained: linknode remove %s takes it out for good\n", cell(id), cell(id))
	return 0
}

// cliKey is what keys create was given.
type cliKey struct {
	name, owner, scopes string
	rate                uint
}

// keys runs linknode keys create|list|revoke.
func (a admin) keys(ctx context.Context, args []string, k cliKey, asJSON bool, stdout, stderr io.Writer) int {
	usage := "usage: linknode keys [-addr A] [-key K] create -name N -owner O [-scopes S] [-rate-limit R] | list | revoke ID (flags before the action)"
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	fail := func(what string, status int, body []byte, err error) int {
		if err != nil {
			fmt.Fprintln(stderr, "linknode:", err)
		} else {
			fmt.Fprintf(stderr, "linknode: %s: %d %s\n", what, status, termSafe(body))
		}
		return 1
	}
	switch args[0] {
	case "create":
		req := map[string]any{"name": k.name, "owner": k.owner, "scopes": strings.Split(k.scopes, ",")}
		if k.rate > 0 {
			req["rate_limit"] = k.rate
		}
		status, body, err := a.callBody(ctx, http.MethodPost, a.base+"/api/v1/keys", req)
		if err != nil || status != http.StatusCreated {
			return fail("create key", status, body, err)
		}
		if asJSON {
			return writeJSON(stdout, stderr, body)
		}
		var out struct{ ID, Key, Owner string }
		if err := json.Unmarshal(body, &out); err != nil || out.Key == "" {
			return fail("create key", status, body, fmt.Errorf("the answer holds no key: %v", err))
		}
		fmt.Fprintf(stderr, "key %s for owner %s made; it is shown this once:\n", cell(out.ID), cell(out.Owner))
		fmt.Fprintln(stdout, cell(out.Key))
		return 0
	case "list":
		status, body, err := a.call(ctx, http.MethodGet, a.base+"/api/v1/keys")
		if err != nil || status != http.StatusOK {
			return fail("list keys", status, body, err)
		}
		if asJSON {
			return writeJSON(stdout, stderr, body)
		}
		var out struct {
			Keys []struct {
				ID, Name, Owner string
				Scopes          []string
				RateLimit       *uint32   `json:"rate_limit"`
				CreatedAt       time.Time `json:"created_at"`
			}
		}
		if err := json.Unmarshal(body, &out); err != nil {
			return fail("list keys", status, body, err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tOWNER\tSCOPES\tRATE LIMIT\tCREATED")
		for _, k := range out.Keys {
			rl := "-"
			if k.RateLimit != nil {
				rl = fmt.Sprintf("%d/s", *k.RateLimit)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cell(k.ID), cell(k.Name), cell(k.Owner), cell(strings.Join(k.Scopes, ",")), rl, k.CreatedAt.Format(time.RFC3339))
		}
		return boolExit(tw.Flush() == nil)
	case "revoke":
		if len(args) != 2 {
			fmt.Fprintln(stderr, usage)
			return 2
		}
		status, body, err := a.call(ctx, http.MethodDelete, a.base+"/api/v1/keys/"+args[1])
		if err != nil || status != http.StatusNoContent {
			return fail("revoke key", status, body, err)
		}
		fmt.Fprintf(stdout, "key %s revoked\n", args[1])
		return 0
	}
	fmt.Fprintln(stderr, usage)
	return 2
}

// writeJSON passes a JSON answer on (-o json) if it is JSON: raw bytes
// that are not never reach the terminal.
func writeJSON(stdout, stderr io.Writer, body []byte) int {
	if !json.Valid(body) {
		fmt.Fprintf(stderr, "linknode: the answer is not JSON: %s\n", termSafe(body))
		return 1
	}
	_, _ = stdout.Write(jsonTermSafe(bytes.TrimSpace(body)))
	fmt.Fprintln(stdout)
	return 0
}

// jsonTermSafe is valid JSON made safe for a terminal: the unsafe runes a
// JSON string may hold raw (DEL, the C1 controls, bidi overrides; a C0
// control is raw only as whitespace between tokens) become \u escapes,
// which mean the same to a JSON reader.
func jsonTermSafe(b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		// A stray byte (0x9b is CSI to a terminal that is not UTF-8) is
		// U+FFFD, as a JSON reader would take it.
		stray := r == utf8.RuneError && size == 1
		if stray || r >= 0x7f && unsafeRune(r) {
			if out == nil {
				out = append(make([]byte, 0, len(b)+16), b[:i]...)
			}
			out = fmt.Appendf(out, `\u%04x`, r)
		} else if out != nil {
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	if out == nil {
		return b
	}
	return out
}

func boolExit(ok bool) int {
	if ok {
		return 0
	}
	return 1
}
