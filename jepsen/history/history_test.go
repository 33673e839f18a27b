package history

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

func TestRecorderPairsAndRoundTrip(t *testing.T) {
	t.Parallel()
	r := NewRecorder()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			p := r.NewProcess()
			for i := range 50 {
				inv := r.Invoke(Op{Process: p, F: "create", Value: "v"})
				typ := OK
				if i%7 == 0 {
					typ = Info
				}
				r.Complete(inv, typ, Op{Key: "k", Status: 201})
				if typ == Info {
					p = r.NewProcess()
				}
			}
		})
	}
	wg.Wait()
	r.Add(Op{Process: NemesisProcess, Type: OK, F: "start"})
	ops := r.Ops()
	for i := 1; i < len(ops); i++ {
		if ops[i].Time < ops[i-1].Time || ops[i].Index != i {
			t.Fatalf("op %d: time or index out of order", i)
		}
	}
	pairs, err := Pairs(ops)
	if err != nil {
		t.Fatal(err)
	}
	if len(pairs) != 400 {
		t.Fatalf("%d pairs, want 400", len(pairs))
	}
	for _, p := range pairs {
		if p.Completion == nil || p.Completion.Key != "k" || p.Completion.Process != p.Invoke.Process {
			t.Fatalf("bad pair %+v", p)
		}
	}
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, ops); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSONL(&buf)
	if err != nil || len(back) != len(ops) || back[5] != ops[5] {
		t.Fatalf("round trip: %d ops, %v", len(back), err)
	}
	buf.Reset()
	if err := WriteEDN(&buf, ops[:2]); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), "{:index 0, :time ") || !strings.Contains(buf.String(), ":type :invoke") {
		t.Fatalf("edn: %s", buf.String())
	}
}

func TestPairsRejectsHarnessBugs(t *testing.T) {
	t.Parallel()
	if _, err := Pairs([]Op{{Process: 1, Type: Invoke}, {Process: 1, Type: Invoke}}); err == nil {
		t.Fatal("two open operations on one process accepted")
	}
	if _, err := Pairs([]Op{{Process: 1, Type: OK}}); err == nil {
		t.Fatal("completion without invocation accepted")
	}
}
