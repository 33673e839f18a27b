package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// escapes are what a hostile answer would have an operator's terminal run:
// a title change, a screen wipe, a CSI by its one-byte C1 form, a bidi
// override, a bell.
const escapes = "\x1b]0;owned\x07\x1b[2J\u009b31m\u202e"

// noEnv is a lookupEnv with nothing set.
func noEnv(string) (string, bool) { return "", false }

// assertTermSafe fails if out holds any byte or rune of escapes.
func assertTermSafe(t *testing.T, what string, out string) {
	t.Helper()
	for _, r := range []string{"\x1b", "\x07", "\u009b", "\u202e"} {
		if strings.Contains(out, r) {
			t.Fatalf("%s passed %q to the terminal: %q", what, r, out)
		}
	}
}

// TestCLIAgainstAHostileServer points the CLI at a server that answers as
// a compromised or impostor node would: terminal escapes in errors and in
// table cells, an endless answer, non-JSON where JSON is promised, a
// redirect that would carry the key elsewhere, and a CSV export with one
// field larger than any sane record. The CLI prints none of the escapes,
// buffers no more than its bound, never follows the redirect, and counts
// the export in constant memory.
func TestCLIAgainstAHostileServer(t *testing.T) {
	// Not parallel: the export's allocations are read from the process's
	// counters, which parallel tests' nodes would add to (a CI run saw 20
	// MiB of theirs).
	var elsewhere atomic.Int32
	thief := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			elsewhere.Add(1)
		}
	}))
	defer thief.Close()
	status := map[string]any{
		"node_id": "n1" + escapes, "cluster_id": "c", "code_mode": "permuted",
		"nodes": []map[string]any{{"id": "n1" + escapes, "status": "alive", "http_addr": escapes}},
		"meta":  map[string]any{"id": "meta", "leader": escapes, "replicas": []string{escapes}},
		"shards": []map[string]any{{"id": "shard-0" + escapes, "leader": "n1", "state": escapes,
			"last_contact": escapes}},
	}
	var mode atomic.Value
	var endlessSent atomic.Int64
	endlessDone := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load().(string) {
		case "escape-error":
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"detail":"`+escapes+`"}`)
		case "escape-table":
			_ = json.NewEncoder(w).Encode(status)
		case "endless":
			defer func() { endlessDone <- struct{}{} }()
			chunk := bytes.Repeat([]byte("x"), 1<<20)
			for i := 0; i < 512; i++ { // 512 MiB, 16 times the bound
				if _, err := w.Write(chunk); err != nil {
					return
				}
				endlessSent.Add(int64(len(chunk)))
			}
		case "not-json":
			_, _ = io.WriteString(w, escapes)
		case "raw-in-json":
			// Valid JSON whose strings hold, raw, what a terminal runs:
			// DEL, a C1 CSI (UTF-8), a bidi override, a stray 0x9b byte.
			_, _ = io.WriteString(w, "{\"keys\":[{\"id\":\"k1\",\"name\":\"\x7f\u009b2J\u202e\x9b2J\"}]}")
		case "redirect":
			http.Redirect(w, r, thief.URL+r.URL.Path, http.StatusTemporaryRedirect)
		case "import":
			enc := json.NewEncoder(w)
			_ = enc.Encode(map[string]any{"row": 1, "status": 400, "problem": map[string]string{"type": "x", "detail": escapes}})
			_ = enc.Encode(map[string]any{"done": true, "format": "csv" + escapes, "rows": 1, "failed": 1,
				"problem": map[string]string{"detail": escapes}})
		case "export":
			// A header, a record with a 48 MiB quoted field (line breaks
			// and doubled quotes in it), and one more record.
			_, _ = io.WriteString(w, "code,url\r\n\"")
			chunk := []byte(strings.Repeat("a\"\"b\r\n", 1<<15))
			for sent := 0; sent < 48<<20; sent += len(chunk) {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
			_, _ = io.WriteString(w, "\",https://example.com/\r\nxyz,https://example.com/2\r\n")
		}
	}))
	defer srv.Close()
	run := func(m string, cli func(stdout, stderr io.Writer) int) (int, string, string) {
		t.Helper()
		mode.Store(m)
		var stdout, stderr bytes.Buffer
		code := cli(&stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	admin := func(args ...string) func(stdout, stderr io.Writer) int {
		return func(stdout, stderr io.Writer) int {
			return runCLI(args[0], append([]string{"-addr", srv.URL, "-key", "k"}, args[1:]...), noEnv, stdout, stderr)
		}
	}

	for _, cmd := range [][]string{{"status"}, {"remove", "n2"}, {"keys", "list"}, {"keys", "revoke", "k1"}} {
		code, out, errOut := run("escape-error", admin(cmd...))
		if code != 1 || !strings.Contains(errOut, `\x1b]0;owned`) {
			t.Fatalf("%v against an error with escapes: exit %d, %q", cmd, code, errOut)
		}
		assertTermSafe(t, strings.Join(cmd, " "), out+errOut)
	}
	for _, cmd := range []string{"status", "members", "shards"} {
		code, out, errOut := run("escape-table", admin(cmd))
		if code != 0 || !strings.Contains(out, "n1") {
			t.Fatalf("%s: exit %d: %s %s", cmd, code, out, errOut)
		}
		assertTermSafe(t, cmd+" table", out+errOut)
	}

	code, _, errOut := run("endless", admin("status"))
	if code != 1 || !strings.Contains(errOut, "too large") {
		t.Fatalf("status against an endless answer: exit %d, %q", code, errOut)
	}
	<-endlessDone // the CLI hung up, so the server's writes fail
	// What the server got written is what the CLI read plus what the
	// kernel held in the two sockets' buffers, whose ceilings are the
	// machine's (a CI machine's tcp_rmem allowed 32 MiB and the server
	// wrote 54 MiB against a CLI that read its 32).
	kernel := tcpBufferMax(t, "tcp_rmem") + tcpBufferMax(t, "tcp_wmem")
	if sent := endlessSent.Load(); sent > maxAnswer+16<<20+kernel {
		t.Fatalf("the CLI read %d MiB of an endless answer (sockets can hold %d MiB)", sent>>20, kernel>>20)
	}

	for _, cmd := range [][]string{{"status", "-o", "json"}, {"members", "-o", "json"}, {"shards", "-o", "json"}} {
		code, out, errOut := run("escape-table", admin(cmd...))
		if code != 0 || !json.Valid([]byte(out)) {
			t.Fatalf("%v: exit %d: %s %s", cmd, code, out, errOut)
		}
		assertTermSafe(t, strings.Join(cmd, " "), out+errOut)
	}
	code, out, errOut := run("raw-in-json", admin("keys", "-o", "json", "list"))
	var keys struct{ Keys []struct{ Name string } }
	if code != 0 || json.Unmarshal([]byte(out), &keys) != nil || len(keys.Keys) != 1 ||
		keys.Keys[0].Name != "\x7f\u009b2J\u202e\ufffd2J" {
		t.Fatalf("keys -o json with raw controls in its strings: exit %d, %q %q", code, out, errOut)
	}
	assertTermSafe(t, "keys -o json", out)
	if strings.ContainsAny(out, "\x7f") || strings.Contains(out, "\x9b") {
		t.Fatalf("keys -o json passed DEL or a stray byte: %q", out)
	}

	code, out, errOut = run("not-json", admin("keys", "-o", "json", "list"))
	if code != 1 || out != "" {
		t.Fatalf("keys -o json with an answer that is not JSON: exit %d, stdout %q", code, out)
	}
	assertTermSafe(t, "keys -o json", errOut)

	code, _, errOut = run("redirect", admin("status"))
	if code != 1 || !strings.Contains(errOut, "redirects to "+thief.URL) {
		t.Fatalf("status against a redirect: exit %d, %q", code, errOut)
	}
	fixture := filepath.Join(t.TempDir(), "links.csv")
	if err := os.WriteFile(fixture, []byte("url\nhttps://example.com/\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	transfer := func(args ...string) func(stdout, stderr io.Writer) int {
		return func(stdout, stderr io.Writer) int {
			return runTransfer(args[0], append([]string{"-url", srv.URL, "-key", "k", "-q"}, args[1:]...), noEnv, stdout, stderr)
		}
	}
	code, _, errOut = run("redirect", transfer("import", fixture))
	if code != 1 || !strings.Contains(errOut, "redirects to "+thief.URL) {
		t.Fatalf("import against a redirect: exit %d, %q", code, errOut)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("the key went to the redirect's target %d times", n)
	}

	code, out, errOut = run("import", transfer("import", fixture))
	if code != 1 || !strings.Contains(errOut, `row 1: 400 \x1b]0;owned`) || !strings.Contains(errOut, "the import stopped") {
		t.Fatalf("import with escapes in its rows: exit %d, %q %q", code, out, errOut)
	}
	assertTermSafe(t, "import", out+errOut)

	dest := filepath.Join(t.TempDir(), "export.csv")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	code, out, errOut = run("export", transfer("export", "-format", "csv", "-o", dest))
	runtime.ReadMemStats(&after)
	if code != 0 || !strings.Contains(out, "exported 2 links") {
		t.Fatalf("export with a 48 MiB field: exit %d, %q %q", code, out, errOut)
	}
	if st, err := os.Stat(dest); err != nil || st.Size() < 48<<20 {
		t.Fatalf("the export file: %v %v", st, err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Fatalf("counting an export with a 48 MiB field allocated %d MiB", grew>>20)
	}
}

// TestCountCSVRecords checks the export's record count against CSV's
// corner cases.
func TestCountCSVRecords(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int{
		"":                        0,
		"a,b\n":                   1,
		"a,b\r\n1,2\r\n":          2,
		"a,b\n1,2":                2,
		"a\n\"x\ny\",2\n":         2,
		"a\n\"say \"\"hi\"\"\"\n": 2,
		"a\n\"\"\n":               2,
		"a\n\n1\n\r\n":            2, // blank lines are no records
		"\r\n":                    0,
	} {
		n, err := countCSVRecords(strings.NewReader(in))
		if n != want || err != io.EOF {
			t.Errorf("%q: %d %v, want %d", in, n, err, want)
		}
	}
	if _, err := countCSVRecords(strings.NewReader("a\n\"open")); err != io.ErrUnexpectedEOF {
		t.Errorf("a stream cut inside quotes: %v", err)
	}
}

// tcpBufferMax is the most the kernel lets one TCP socket buffer in the
// direction of sysctl name (tcp_rmem or tcp_wmem): their third field, or
// Linux's default when the file cannot be read.
func tcpBufferMax(t *testing.T, name string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/ipv4/" + name)
	if err != nil {
		return 6 << 20
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		t.Fatalf("%s reads %q", name, b)
	}
	n, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		t.Fatalf("%s reads %q: %v", name, b, err)
	}
	return n
}
