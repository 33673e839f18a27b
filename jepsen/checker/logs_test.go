package checker

import (
	"bytes"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// moduleRoot is the directory of go.mod above the test's directory.
func moduleRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("no go.mod above the test")
		}
		dir = parent
	}
}

// errorMessages finds, in linknode's own code (not tests, the harness,
// scripts or vendored code), every message logged at ERROR level with a
// constant message — x.Error("msg", ...) and x.Log(ctx, slog.LevelError,
// "msg", ...) — and counts the panic calls.
func errorMessages(tb testing.TB) (msgs map[string][]string, panics int) {
	tb.Helper()
	root := moduleRoot(tb)
	msgs = map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch rel {
			case ".git", "third_party", "jepsen", "scripts", "bench", "store":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "panic" {
				panics++
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			var lit ast.Expr
			switch {
			case sel.Sel.Name == "Error" && len(call.Args) >= 1:
				lit = call.Args[0]
			case (sel.Sel.Name == "Log" || sel.Sel.Name == "LogAttrs") && len(call.Args) >= 3:
				if lv, ok := call.Args[1].(*ast.SelectorExpr); ok && lv.Sel.Name == "LevelError" {
					lit = call.Args[2]
				}
			}
			if bl, ok := lit.(*ast.BasicLit); ok && bl.Kind == token.STRING {
				msg, _ := strconv.Unquote(bl.Value)
				msgs[msg] = append(msgs[msg], fset.Position(bl.Pos()).String())
			}
			return true
		})
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return msgs, panics
}

// TestLogPatternsCoverTheCode derives the logs checker's patterns from the
// code: every ERROR message linknode can log is either one the checker
// flags or one it tolerates with a reason; every flagged message exists in
// the code; and a line of each, as slog writes it in text and in JSON, is
// caught with its kind. A new ERROR message fails this test until someone
// decides which it is.
func TestLogPatternsCoverTheCode(t *testing.T) {
	t.Parallel()
	msgs, panics := errorMessages(t)
	if len(msgs) < len(FatalMessages) || panics == 0 {
		t.Fatalf("found %d ERROR messages and %d panic calls: the walk missed the code", len(msgs), panics)
	}
	var unclassified []string
	for msg, at := range msgs {
		_, fatal := FatalMessages[msg]
		_, tolerated := ToleratedErrors[msg]
		if !fatal && !tolerated {
			unclassified = append(unclassified, msg+" ("+strings.Join(at, ", ")+")")
		}
	}
	sort.Strings(unclassified)
	if len(unclassified) > 0 {
		t.Errorf("ERROR messages neither flagged nor tolerated by the logs checker:\n%s", strings.Join(unclassified, "\n"))
	}
	for msg, kind := range FatalMessages {
		if _, ok := msgs[msg]; !ok {
			t.Errorf("FatalMessages has %q, which the code never logs", msg)
		}
		for _, format := range []string{"text", "json"} {
			var buf bytes.Buffer
			var h slog.Handler = slog.NewTextHandler(&buf, nil)
			if format == "json" {
				h = slog.NewJSONHandler(&buf, nil)
			}
			slog.New(h).Error(msg, "err", errors.New("boom"), "path", "/x y")
			if got := newLogMatcher().match(strings.TrimSuffix(buf.String(), "\n")); got != kind {
				t.Errorf("%s line %q matched %q, want %q", format, buf.String(), got, kind)
			}
		}
	}
	for msg := range ToleratedErrors {
		var buf bytes.Buffer
		slog.New(slog.NewTextHandler(&buf, nil)).Error(msg, "err", "x")
		if got := newLogMatcher().match(strings.TrimSuffix(buf.String(), "\n")); got != "" {
			t.Errorf("tolerated %q matched %q", msg, got)
		}
	}
}

// What the runtime prints is caught; what faults make raft log is not.
func TestLogs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clean := filepath.Join(dir, "clean.log")
	lines := []string{
		`time=2026-11-26T13:34:00Z level=ERROR msg="failed to appendEntries to" node=n2 group=shard-1 component=raft error="dial tcp: connection refused"`,
		`time=2026-11-26T13:34:00Z level=WARN msg="request unavailable" method=POST path=/api/v1/links err="no leader"`,
		`time=2026-11-26T13:34:00Z level=INFO msg="shutting down"`,
		`time=2026-11-26T13:34:00Z level=INFO msg=stopped`,
	}
	if err := os.WriteFile(clean, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := CheckLogs(map[string]string{"n1": clean}); r.Valid != Valid {
		t.Fatalf("a log of a healthy node under faults judged %v: %+v", r.Valid, r)
	}
	for line, kind := range map[string]string{
		"panic: fsm shard.db: index 7: bad command":   "panic",
		"fatal error: concurrent map writes":          "fatal",
		"WARNING: DATA RACE":                          "data-race",
		"[signal SIGSEGV: segmentation violation pc]": "fatal",
	} {
		dirty := filepath.Join(dir, kind+".log")
		if err := os.WriteFile(dirty, []byte(lines[0]+"\n"+line+"\ngoroutine 1 [running]:\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := CheckLogs(map[string]string{"n1": clean, "n2": dirty})
		if r.Valid != Invalid || r.AnomalyCount != 1 || r.Anomalies[0].Kind != kind {
			t.Errorf("%q judged %v: %+v", line, r.Valid, r)
		}
	}
}
