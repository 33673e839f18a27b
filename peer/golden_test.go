package peer

import (
	"bytes"
	goflag "flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/golden"
	"github.com/linkraft/linkraft/link"
)

var updateGolden = goflag.Bool("update-golden", false, "rewrite testdata/messages.golden from the current encoders")

var (
	t0 = time.Date(2026, 11, 27, 12, 0, 0, 123456789, time.UTC)
	t1 = t0.Add(90 * time.Minute)
	lk = &link.Link{Code: "abc", URL: "https://example.com/x", Owner: "team-a", CreatedAt: t0, UpdatedAt: t1, Redirect: 308, Tags: []string{"t"}, Nonce: 42, Version: 1234}
)

// sample is a message's encoding and its check: it decodes and encodes
// back to the same bytes.
type sample struct {
	name   string
	encode func() []byte
	again  func(b []byte) ([]byte, error)
}

// messageSample is a sample of one message of codec c.
func messageSample[M any](name string, c interface {
	Append([]byte, *M) []byte
	Decode([]byte) (*M, error)
}, m *M) sample {
	return sample{name: name,
		encode: func() []byte { return c.Append(nil, m) },
		again: func(b []byte) ([]byte, error) {
			v, err := c.Decode(b)
			if err != nil {
				return nil, err
			}
			return c.Append(nil, v), nil
		},
	}
}

// opSamples are a request and a response of op, every field set.
func opSamples[Req, Resp any](op Op[Req, Resp], req *Req, resp *Resp) []sample {
	return []sample{
		messageSample(op.Name+" request", op.req, req),
		messageSample(op.Name+" response", op.resp, resp),
	}
}

func samples() []sample {
	yes := true
	var out []sample
	for _, s := range [][]sample{
		{messageSample("envelope", envelopeCodec, &envelope{Op: 6, BudgetMS: 2500, Body: []byte{1, 2, 3}})},
		{messageSample("reply", replyCodec, &reply{Code: 9, Detail: "invalid input: x", Body: []byte{4}})},
		opSamples(opHello, &Hello{Version: 1}, &Hello{Version: 1}),
		opSamples(OpApply, &ApplyRequest{Group: 3, Command: (&command.Delete{Code: "abc", Now: t0}).Encode(), Hops: 1},
			&ApplyResponse{Leader: "10.0.0.1:7000", Link: lk, LeaseStart: 1024, LeaseEnd: 2048,
				Placement: &command.Placement{Version: 2, Shards: [][]string{{"n1", "n2"}, {}}, Removed: []string{"n9"}},
				Batch:     []command.LinkResult{{Link: lk}, {Err: link.ErrAliasTaken}},
				Claim:     &command.ClaimResult{Claim: command.Claim{Body: "b", Codes: []string{"abc"}, Expires: t1, Attempt: 7}, Existing: true}}),
		{messageSample("apply response (restore)", OpApply.resp, &ApplyResponse{Restore: &command.RestoreResult{Restored: 5, Present: 2, Conflicts: []string{"abc"}}})},
		opSamples(OpLookup, &LookupRequest{Shard: 5, Code: "abc", Consistent: true, Hops: 2}, &LinkResponse{Link: lk}),
		opSamples(OpClicks, &ClicksRequest{Shard: 1, Code: "abc", From: t0, To: t1},
			&ClicksResponse{Stats: &command.ClickStats{Totals: command.ClickTotals{Humans: command.Counts{Total: 3}}, Hours: []command.HourCount{{Hour: 490000, Humans: 3}}}}),
		opSamples(OpVisits, &VisitsRequest{Code: "abc", From: t0, To: t1, Limit: 50},
			&VisitsResponse{Visits: []link.Visit{{Code: "abc", Time: t0, Node: "n1", Network: "192.0.2.0/24", Country: "DE", UserAgent: "ua", Referer: "https://r.example/", Bot: true}}}),
		opSamples(OpOrphans, &OrphansRequest{Limit: 40}, &link.OrphanSummary{Total: 9, Top: []link.CodeCount{{Code: "nope", Count: 9}}}),
		opSamples(OpList, &ListRequest{Shard: 2, Hops: 1, Query: link.ListQuery{Owner: "team-a", Tag: "t", Text: "ex", CreatedAfter: t0, CreatedBefore: t1,
			Expired: &yes, Disabled: new(false), Now: t1, Desc: true, ByClicks: true, After: &link.ListPosition{Created: t0, Clicks: 3, Code: "abc"}, Limit: 100, Scan: 10000}},
			&ListResponse{Links: []ListedLink{{Link: lk, Clicks: 12}}, More: true, Stop: &link.ListPosition{Created: t1, Code: "zz"}}),
		opSamples(OpTags, &TagsRequest{Shard: 0, Owner: "team-a", Hops: 1}, &TagsResponse{Tags: []link.TagCount{{Tag: "t", Links: 4}}}),
		opSamples(OpPromise, &PromiseRequest{Proposer: "n1"}, &PromiseResponse{Answer: PromiseRefused, Holder: "n0"}),
		opSamples(OpRelease, &ReleaseRequest{Promiser: "n3"}, &ReleaseResponse{Released: true}),
		opSamples(OpReadIndex, &ReadIndexRequest{Group: 4}, &ReadIndexResponse{Index: 981}),
		opSamples(OpApplied, &AppliedRequest{Group: 3}, &AppliedResponse{Index: 977}),
		opSamples(OpDump, &DumpRequest{Shard: 3, After: "abc", Hops: 1}, &DumpResponse{More: true, ReadAt: 77, Links: []command.RestoredLink{
			{Code: "abd", Record: command.EncodeRecord(lk), Clicks: command.ClickStats{Totals: command.ClickTotals{Humans: command.Counts{Total: 2}}}}}}),
	} {
		out = append(out, s...)
	}
	return out
}

// TestMessagesAreUnchanged pins the bytes of every message of the
// protocol: nodes of two versions talk to each other during a rolling
// upgrade, so a message may change only with a new field or operation.
// Each pinned encoding must also decode and encode back to itself.
func TestMessagesAreUnchanged(t *testing.T) {
	t.Parallel()
	ss := samples()
	pins := make([]golden.Sample, len(ss))
	for i, s := range ss {
		pins[i] = golden.Sample{Name: s.name, Bytes: s.encode()}
	}
	pinned := golden.Check(t, "testdata/messages.golden", pins, *updateGolden)
	for _, s := range ss {
		back, err := s.again(pinned[s.name])
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if !bytes.Equal(back, pinned[s.name]) {
			t.Errorf("%s: decoded and encoded again\n%x\npinned\n%x", s.name, back, pinned[s.name])
		}
	}
}

// TestEveryOperationIsPinned: each operation declared in this package
// (an Op[...] literal in its source, the hello and the legacy table's
// included) has its request and response in the golden file, so a new
// operation without a pin fails here.
func TestEveryOperationIsPinned(t *testing.T) {
	t.Parallel()
	names := map[string]bool{}
	for _, s := range samples() {
		names[s.name] = true
	}
	declared := declaredOps(t)
	for id, op := range legacyOps {
		declared[op.name] = fmt.Sprintf("legacy operation %d", id)
	}
	if len(declared) < 13 {
		t.Fatalf("found %d operations in the source, want at least 13: %v", len(declared), declared)
	}
	for name, where := range declared {
		for _, kind := range []string{" request", " response"} {
			if !names[name+kind] {
				t.Errorf("%s (%s) has no pinned%s", where, name, kind)
			}
		}
	}
}

// declaredOps finds every Op[...]{...} literal in the package's non-test
// source and returns its Name by where it is declared.
func declaredOps(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			ix, ok := lit.Type.(*ast.IndexListExpr)
			if !ok {
				return true
			}
			if id, ok := ix.X.(*ast.Ident); !ok || id.Name != "Op" {
				return true
			}
			for _, e := range lit.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Name" {
					if v, ok := kv.Value.(*ast.BasicLit); ok {
						name, _ := strconv.Unquote(v.Value)
						out[name] = fset.Position(lit.Pos()).String()
					}
				}
			}
			return true
		})
	}
	return out
}
