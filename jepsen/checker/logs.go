package checker

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// FatalMessages are the messages linknode logs (log/slog, level ERROR) when
// something broke that must never break under faults: a panic it recovered
// from, a failure that ends the process, a listener that stopped, an error
// the HTTP layer could not classify (answered 500). They come from the code
// (TestLogPatternsCoverTheCode finds every ERROR message there and requires
// each to be here or in ToleratedErrors).
var FatalMessages = map[string]string{
	"panic in handler":                "panic",
	"panic in the redirect fast path": "panic",
	"peer request handler panicked":   "panic",
	"start failed":                    "fatal",
	"shutdown":                        "fatal",
	"shutdown timed out; exiting":     "fatal",
	"http server stopped":             "fatal",
	"admin http server stopped":       "fatal",
	"peer port stopped":               "fatal",
	"internal error":                  "internal-error",
	// A replica rejected a committed entry: a leader proposed what apply
	// refuses, which the harness's workloads never send.
	"rejected a committed command": "rejected-entry",
	"apply halted on this node":    "apply-halted",
	// The harness's nodes are one cluster with their data dirs kept: none
	// is ever refused.
	"node refused":                         "node-refused",
	"this node was refused by the cluster": "node-refused",
	// Every node of the harness runs the one binary: none is ever
	// rolled back.
	// The web UI renders only its own templates with its own data: a
	// page that fails to render is a bug, whoever asked for it.
	"web ui: rendering a page failed": "ui-bug",
	"node rolled back to a version from before feature levels were recorded: links with a password or rules are refused while it is live, but those it already holds are served by it without them; upgrade it again": "rolled-back",
}

// ToleratedErrors are ERROR messages of linknode's own code that faults
// cause in a healthy node, with the reason they are not anomalies. (Raft's
// own ERROR lines — "failed to appendEntries to", "failed to heartbeat to"
// — come through its logger adapter with messages of raft's, and are
// likewise expected under faults.)
var ToleratedErrors = map[string]string{
	"commit failed; retrying (a full disk?)": "the disk-full fault fills a node's disk: the failed commit is retried, never skipped; " +
		"the replicas checker judges that the node catches up",
	"storage alarm: writes that grow the state are refused until space returns": "the disk-full fault raises it; refused writes are " +
		"definite failures (507) that the set and register checkers hold to",
	"cannot join: no -join address answered with this cluster key; retrying": "a node restarted into a partition reaches no one for a while; " +
		"whether it comes back is the nodes and converge checkers' to judge",
	"backup cut short": "an operator's backup that a client left or a group without a leader ended; the client gets a stream " +
		"without its manifest, which a restore refuses; the cluster's state is not touched",
	"web ui: an API call failed": "the web UI's page could not be answered (a node without a leader for the shard asked, a timeout): " +
		"the page says so; the harness's clients use the API, whose answers the checkers judge",
	"web ui: sign-in failed":          "the keys could not be read while the node starts or loses the meta group: the page says so",
	"web ui: reading the keys failed": "as for a sign-in: the page answers 503 and the session stays",
}

// runtimeLines are what the Go runtime and the race detector print (at the
// start of a line) when a process crashes or races.
var runtimeLines = []struct{ prefix, kind string }{
	{"panic: ", "panic"},
	{"fatal error: ", "fatal"},
	{"WARNING: DATA RACE", "data-race"},
	{"[signal SIG", "fatal"},
}

// msgPatterns are the forms a message takes in slog's text and JSON output.
func msgPatterns(msg string) []string {
	text := "msg=" + msg
	if msg == "" || strings.ContainsAny(msg, " =\"\\") {
		text = fmt.Sprintf("msg=%q", msg)
	}
	return []string{text + " ", text + "\n", fmt.Sprintf(`"msg":%q`, msg)}
}

// logMatcher classifies node-log lines.
type logMatcher struct {
	patterns []struct{ pat, kind, msg string }
}

func newLogMatcher() *logMatcher {
	m := &logMatcher{}
	msgs := make([]string, 0, len(FatalMessages))
	for msg := range FatalMessages {
		msgs = append(msgs, msg)
	}
	sort.Strings(msgs)
	for _, msg := range msgs {
		for _, p := range msgPatterns(msg) {
			m.patterns = append(m.patterns, struct{ pat, kind, msg string }{p, FatalMessages[msg], msg})
		}
	}
	return m
}

// match returns the kind of a bad line, or "".
func (m *logMatcher) match(line string) string {
	for _, r := range runtimeLines {
		if strings.HasPrefix(line, r.prefix) {
			return r.kind
		}
	}
	line += "\n"
	for _, p := range m.patterns {
		if strings.Contains(line, p.pat) {
			return p.kind
		}
	}
	return ""
}

// CheckLogs scans node logs (name -> path) for panics (crashing or
// recovered), fatal errors, failures that end a node, unclassified internal
// errors and data races (Jepsen's log-file-pattern checker).
func CheckLogs(logs map[string]string) Result {
	res := Result{Checker: "logs", Stats: map[string]int{}}
	m := newLogMatcher()
	names := sortedKeys(keysOf(logs))
	for _, name := range names {
		path := logs[name]
		f, err := os.Open(path)
		if err != nil {
			res.add(Anomaly{Kind: "unreadable-log", Detail: err.Error()})
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		line := 0
		for sc.Scan() {
			line++
			res.Stats["lines"]++
			if kind := m.match(sc.Text()); kind != "" {
				res.Stats[kind]++
				res.add(Anomaly{Kind: kind, Detail: fmt.Sprintf("%s (%s:%d): %s", name, filepath.Base(path), line, strings.TrimSpace(sc.Text()))})
			}
		}
		f.Close()
	}
	if res.AnomalyCount > 0 {
		res.Valid = Invalid
		res.Summary = fmt.Sprintf("%d panics, fatal errors, internal errors or data races in node logs", res.AnomalyCount)
	} else {
		res.Summary = fmt.Sprintf("%d log lines from %d nodes, no panics, fatal errors, internal errors or data races", res.Stats["lines"], len(logs))
	}
	return res
}
