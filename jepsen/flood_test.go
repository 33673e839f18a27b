package jepsen

import (
	"testing"

	"github.com/linkraft/linkraft/jepsen/checker"
	"github.com/linkraft/linkraft/jepsen/history"
)

// TestLegitDuring: a flood's record gets the workloads' operations
// invoked while it was in force (their count, failures and p99) beside
// the rest of the run; other faults' records get nothing; the nemesis's
// own operations are not counted.
func TestLegitDuring(t *testing.T) {
	t.Parallel()
	const s = int64(1e9)
	var ops []history.Op
	call := func(proc int, at, took int64, typ history.Type) {
		ops = append(ops, history.Op{Process: proc, Type: history.Invoke, Time: at}, history.Op{Process: proc, Type: typ, Time: at + took})
	}
	for i := range 100 { // outside: 1 ms each, every tenth fails
		typ := history.OK
		if i%10 == 0 {
			typ = history.Fail
		}
		call(1, int64(i)*s/100, s/1000, typ)
	}
	for i := range 100 { // during the flood (from 2 s to 3 s): 5 ms, one 80 ms, two unknown
		took, typ := 5*s/1000, history.OK
		if i == 50 {
			took = 80 * s / 1000
		}
		if i < 2 {
			typ = history.Info
		}
		call(2, 2*s+int64(i)*s/200, took, typ)
	}
	ops = append(ops, history.Op{Process: history.NemesisProcess, Type: history.Invoke, Time: 2 * s}, history.Op{Process: history.NemesisProcess, Type: history.OK, Time: 3 * s})
	records := []checker.FaultRecord{{Fault: "flood", Injected: true, Start: 2, End: 3}, {Fault: "kill-one", Injected: true, Start: 0, End: 1}}
	legitDuring(records, ops)
	l := records[0].Legit
	if l == nil || l.Ops != 100 || l.Errors != 2 || l.ErrorRate != 0.02 || l.P99MS != 80 || l.P99MSOutside != 1 || l.ErrorRateOutside != 0.1 {
		t.Fatalf("flood record: %+v", l)
	}
	if records[1].Legit != nil {
		t.Fatalf("a kill got legit traffic: %+v", records[1].Legit)
	}
}
