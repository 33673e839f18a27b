package checker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/linkraft/linkraft/jepsen/history"
)

// h builds a history from (process, type, f, key, value, status) rows, one
// time unit apart.
type row struct {
	p      int
	typ    history.Type
	f, key string
	value  string
	status int
	wl     string
	node   string
}

func build(rows ...row) []history.Op {
	ops := make([]history.Op, len(rows))
	for i, r := range rows {
		wl := r.wl
		if wl == "" {
			wl = "register"
		}
		ops[i] = history.Op{Index: i, Time: int64(i * 10), Process: r.p, Type: r.typ, F: r.f, Key: r.key,
			Value: r.value, Status: r.status, Workload: wl, Node: r.node}
	}
	return ops
}

func TestRegisterValidAndStaleRead(t *testing.T) {
	t.Parallel()
	valid := build(
		row{p: 0, typ: history.Invoke, f: FCreate, key: "k", value: "u1"},
		row{p: 0, typ: history.OK, f: FCreate, key: "k", value: "u1", status: 201},
		row{p: 1, typ: history.Invoke, f: FUpdate, key: "k", value: "u2"},
		row{p: 2, typ: history.Invoke, f: FRead, key: "k"},
		row{p: 2, typ: history.OK, f: FRead, key: "k", value: "u1", status: 200}, // concurrent with the update
		row{p: 1, typ: history.OK, f: FUpdate, key: "k", value: "u2", status: 200},
		row{p: 0, typ: history.Invoke, f: FCreate, key: "k", value: "u3"},
		row{p: 0, typ: history.Fail, f: FCreate, key: "k", value: "u3", status: 409},
		row{p: 3, typ: history.Invoke, f: FDelete, key: "k"},
		row{p: 3, typ: history.Info, f: FDelete, key: "k"}, // may happen any time later
		row{p: 2, typ: history.Invoke, f: FRead, key: "k"},
		row{p: 2, typ: history.OK, f: FRead, key: "k", value: "u2", status: 200},
		row{p: 2, typ: history.Invoke, f: FRead, key: "k"},
		row{p: 2, typ: history.OK, f: FRead, key: "k", status: 404},
	)
	if r := CheckRegister(valid, RegisterOptions{}); r.Valid != Valid {
		t.Fatalf("valid history judged %v: %s", r.Valid, r.Summary)
	}
	// After the update was acknowledged, a read returns the old URL.
	stale := build(
		row{p: 0, typ: history.Invoke, f: FCreate, key: "k", value: "u1"},
		row{p: 0, typ: history.OK, f: FCreate, key: "k", value: "u1", status: 201},
		row{p: 1, typ: history.Invoke, f: FUpdate, key: "k", value: "u2"},
		row{p: 1, typ: history.OK, f: FUpdate, key: "k", value: "u2", status: 200},
		row{p: 2, typ: history.Invoke, f: FRead, key: "k"},
		row{p: 2, typ: history.OK, f: FRead, key: "k", value: "u1", status: 200},
	)
	html := filepath.Join(t.TempDir(), "history.html")
	r := CheckRegister(stale, RegisterOptions{HTMLPath: html})
	if r.Valid != Invalid || r.AnomalyCount != 1 || r.Anomalies[0].Kind != "not-linearizable" {
		t.Fatalf("stale read judged %v: %+v", r.Valid, r)
	}
	if fi, err := os.Stat(html); err != nil || fi.Size() == 0 {
		t.Fatalf("no visualization: %v", err)
	}
	// A refused create on a code nobody created is a lie.
	refused := build(
		row{p: 0, typ: history.Invoke, f: FCreate, key: "k", value: "u1"},
		row{p: 0, typ: history.Fail, f: FCreate, key: "k", value: "u1", status: 409},
	)
	if r := CheckRegister(refused, RegisterOptions{}); r.Valid != Invalid {
		t.Fatalf("refused create on a fresh code judged %v", r.Valid)
	}
}

func TestSetLostUnexpectedDuplicated(t *testing.T) {
	t.Parallel()
	ops := build(
		row{p: 0, typ: history.Invoke, f: FCreate, value: "P/set/1", wl: "set", node: "n1"},
		row{p: 0, typ: history.OK, f: FCreate, key: "a", value: "P/set/1", status: 201, wl: "set", node: "n1"},
		row{p: 0, typ: history.Invoke, f: FCreate, value: "P/set/2", wl: "set", node: "n1"},
		row{p: 0, typ: history.OK, f: FCreate, key: "b", value: "P/set/2", status: 201, wl: "set", node: "n1"},
		row{p: 1, typ: history.Invoke, f: FCreate, value: "P/set/3", wl: "set", node: "n2"},
		row{p: 1, typ: history.Info, f: FCreate, value: "P/set/3", wl: "set", node: "n2"},
	)
	good := Final{Nodes: []string{"n1", "n2"}, Recovered: true,
		Resolves: map[string]map[string]Read{
			"n1": {"a": {Status: 302, Location: "P/set/1"}, "b": {Status: 302, Location: "P/set/2"}, "c": {Status: 302, Location: "P/set/3"}},
			"n2": {"a": {Status: 302, Location: "P/set/1"}, "b": {Status: 302, Location: "P/set/2"}, "c": {Status: 302, Location: "P/set/3"}},
		},
		Links: map[string][]Listed{"n1": {{Code: "a", URL: "P/set/1"}, {Code: "b", URL: "P/set/2"}, {Code: "c", URL: "P/set/3"}, {Code: "k", URL: "P/register/k/1"}}},
		APIListed: map[string][]Listed{
			"n1": {{Code: "a", URL: "P/set/1"}, {Code: "k", URL: "P/register/k/1"}, {Code: "b", URL: "P/set/2"}, {Code: "c", URL: "P/set/3"}},
			"n2": {{Code: "a", URL: "P/set/1"}, {Code: "b", URL: "P/set/2"}, {Code: "c", URL: "P/set/3"}},
		},
	}
	if r := CheckSet(ops, good, "P/"); r.Valid != Valid || r.Stats["indeterminate-stored"] != 1 {
		t.Fatalf("good final judged %v: %+v", r.Valid, r)
	}
	// The indeterminate create, seen stored on n1, is known: n2 lacking it
	// is an anomaly (Jepsen's set-full).
	partial := good
	partial.Resolves = map[string]map[string]Read{
		"n1": good.Resolves["n1"],
		"n2": {"a": {Status: 302, Location: "P/set/1"}, "b": {Status: 302, Location: "P/set/2"}, "c": {Status: 404}},
	}
	if r := CheckSet(ops, partial, "P/"); r.Valid != Invalid || r.AnomalyCount != 1 || r.Anomalies[0].Kind != "not-everywhere" {
		t.Fatalf("indeterminate create seen on one node only judged %v: %+v", r.Valid, r)
	}
	// A definite failure that is stored anyway.
	failed := append(append([]history.Op(nil), ops...), build(
		row{p: 5, typ: history.Invoke, f: FCreate, value: "P/set/4", wl: "set", node: "n2"},
		row{p: 5, typ: history.Fail, f: FCreate, value: "P/set/4", status: 400, wl: "set", node: "n2"})...)
	for i := range failed {
		failed[i].Index, failed[i].Time = i, int64(i*10)
	}
	fs := good
	fs.Links = map[string][]Listed{"n1": append(slices.Clone(good.Links["n1"]), Listed{Code: "d", URL: "P/set/4"})}
	if r := CheckSet(failed, fs, "P/"); r.Valid != Invalid || r.Anomalies[0].Kind != "failed-but-stored" {
		t.Fatalf("failed but stored judged %v: %+v", r.Valid, r)
	}
	lost := good
	lost.Resolves = map[string]map[string]Read{
		"n1": {"a": {Status: 302, Location: "P/set/1"}, "b": {Status: 404}},
		"n2": {"a": {Status: 302, Location: "P/set/1"}, "b": {Status: 404}},
	}
	if r := CheckSet(ops, lost, "P/"); r.Valid != Invalid || r.Stats["lost"] != 1 {
		t.Fatalf("lost create judged %v: %+v", r.Valid, r)
	}
	// The API's listing through a node must hold exactly what is stored:
	// one missing, one listed twice, one stored nowhere.
	for name, listed := range map[string][]Listed{
		"missing": {{Code: "a", URL: "P/set/1"}, {Code: "b", URL: "P/set/2"}},
		"twice":   {{Code: "a", URL: "P/set/1"}, {Code: "b", URL: "P/set/2"}, {Code: "c", URL: "P/set/3"}, {Code: "b", URL: "P/set/2"}},
		"nowhere": {{Code: "a", URL: "P/set/1"}, {Code: "b", URL: "P/set/2"}, {Code: "c", URL: "P/set/3"}, {Code: "q", URL: "P/set/8"}},
	} {
		bad := good
		bad.APIListed = map[string][]Listed{"n1": good.APIListed["n1"], "n2": listed}
		if r := CheckSet(ops, bad, "P/"); r.Valid != Invalid || r.AnomalyCount != 1 || r.Anomalies[0].Kind != "listing-differs" {
			t.Fatalf("a listing with one %s judged %v: %+v", name, r.Valid, r)
		}
	}
	noList := good
	noList.APIListed = map[string][]Listed{"n1": good.APIListed["n1"]}
	if r := CheckSet(ops, noList, "P/"); r.Valid != Unknown {
		t.Fatalf("a node that could not be listed judged %v: %+v", r.Valid, r)
	}
	extra := good
	extra.Links = map[string][]Listed{"n2": {{Code: "z", URL: "P/set/9"}, {Code: "y", URL: "P/set/1"}}}
	extra.APIListed = map[string][]Listed{"n1": extra.Links["n2"], "n2": extra.Links["n2"]}
	r := CheckSet(ops, extra, "P/")
	if r.Valid != Invalid || r.AnomalyCount != 2 {
		t.Fatalf("unexpected and duplicated links judged %v: %+v", r.Valid, r)
	}
	if b, _ := json.Marshal(r); len(b) == 0 {
		t.Fatal("result does not encode")
	}
}

func TestUniqueIDs(t *testing.T) {
	t.Parallel()
	ops := build(
		row{p: 0, typ: history.Invoke, f: FCreate, value: "P/set/1", wl: "set", node: "n1"},
		row{p: 0, typ: history.OK, f: FCreate, key: "5", value: "P/set/1", status: 201, wl: "set", node: "n1"},
		row{p: 1, typ: history.Invoke, f: FCreate, value: "P/set/2", wl: "set", node: "n2"},
		row{p: 1, typ: history.OK, f: FCreate, key: "15", value: "P/set/2", status: 201, wl: "set", node: "n2"},
	)
	decode := func(c string) (uint64, error) {
		var n uint64
		for _, d := range c {
			n = n*10 + uint64(d-'0')
		}
		return n, nil
	}
	leases := []Lease{{Start: 0, End: 10, Node: "n1"}, {Start: 10, End: 20, Node: "n2"}}
	per := func(ls []Lease) map[string][]Lease { return map[string][]Lease{"n1": ls, "n2": ls} }
	if r := CheckUniqueIDs(ops, Final{Leases: per(leases)}, decode); r.Valid != Valid {
		t.Fatalf("good judged %v: %+v", r.Valid, r)
	}
	overlap := []Lease{{Start: 0, End: 12, Node: "n1"}, {Start: 10, End: 20, Node: "n2"}}
	if r := CheckUniqueIDs(ops, Final{Leases: per(overlap)}, decode); r.Valid != Invalid {
		t.Fatalf("overlap judged %v", r.Valid)
	}
	foreign := []Lease{{Start: 0, End: 20, Node: "n1"}}
	if r := CheckUniqueIDs(ops, Final{Leases: per(foreign)}, decode); r.Valid != Invalid || r.Anomalies[0].Kind != "foreign-lease" {
		t.Fatalf("foreign lease judged %v: %+v", r.Valid, r)
	}
	dup := append(ops, build(
		row{p: 2, typ: history.Invoke, f: FCreate, value: "P/set/3", wl: "set", node: "n1"},
		row{p: 2, typ: history.OK, f: FCreate, key: "5", value: "P/set/3", status: 201, wl: "set", node: "n1"},
	)...)
	for i := range dup {
		dup[i].Index, dup[i].Time = i, int64(i*10)
	}
	if r := CheckUniqueIDs(dup, Final{Leases: per(leases)}, decode); r.Valid != Invalid || r.Anomalies[0].Kind != "duplicate-code" {
		t.Fatalf("duplicate judged %v: %+v", r.Valid, r)
	}
}

func TestRYW(t *testing.T) {
	t.Parallel()
	ok := build(
		row{p: 0, typ: history.Invoke, f: FCreate, value: "P/ryw/1", wl: "ryw", node: "n1"},
		row{p: 0, typ: history.OK, f: FCreate, key: "a", value: "P/ryw/1", status: 201, wl: "ryw", node: "n1"},
		row{p: 0, typ: history.Invoke, f: FResolve, key: "a", wl: "ryw", node: "n2"},
		row{p: 0, typ: history.OK, f: FResolve, key: "a", value: "P/ryw/1", status: 302, wl: "ryw", node: "n2"},
	)
	if r := CheckRYW(ok); r.Valid != Valid {
		t.Fatalf("good judged %v: %+v", r.Valid, r)
	}
	bad := build(
		row{p: 0, typ: history.Invoke, f: FCreate, value: "P/ryw/1", wl: "ryw", node: "n1"},
		row{p: 0, typ: history.OK, f: FCreate, key: "a", value: "P/ryw/1", status: 201, wl: "ryw", node: "n1"},
		row{p: 0, typ: history.Invoke, f: FResolve, key: "a", wl: "ryw", node: "n2"},
		row{p: 0, typ: history.OK, f: FResolve, key: "a", status: 404, wl: "ryw", node: "n2"},
	)
	if r := CheckRYW(bad); r.Valid != Invalid || r.Anomalies[0].Kind != "stale-read" {
		t.Fatalf("404 after ack judged %v: %+v", r.Valid, r)
	}
}

func TestValidityJSON(t *testing.T) {
	t.Parallel()
	for _, v := range []Validity{Valid, Invalid, Unknown} {
		b, _ := json.Marshal(v)
		var back Validity
		if err := json.Unmarshal(b, &back); err != nil || back != v {
			t.Fatalf("%v -> %s -> %v (%v)", v, b, back, err)
		}
	}
	if Merge(Valid, Unknown) != Unknown || Merge(Unknown, Invalid, Valid) != Invalid {
		t.Fatal("merge order wrong")
	}
}

func TestConverge(t *testing.T) {
	t.Parallel()
	// k1 updated to u2; k2 created and deleted (it must answer 410); k3
	// only ever had an indeterminate create (404 or 410 will do).
	ops := build(
		row{p: 0, typ: history.Invoke, f: FCreate, key: "k2", value: "u9"},
		row{p: 0, typ: history.OK, f: FCreate, key: "k2", value: "u9", status: 201},
		row{p: 0, typ: history.Invoke, f: FDelete, key: "k2"},
		row{p: 0, typ: history.OK, f: FDelete, key: "k2", status: 204},
		row{p: 1, typ: history.Invoke, f: FResolve, key: "k2", node: "n2"},
		row{p: 1, typ: history.OK, f: FResolve, key: "k2", status: 410, node: "n2"},
		row{p: 2, typ: history.Invoke, f: FCreate, key: "k3", value: "u7"},
		row{p: 2, typ: history.Info, f: FCreate, key: "k3", value: "u7"},
	)
	final := Final{Nodes: []string{"n1", "n2"}, Recovered: true,
		Truth: map[string]Read{"k1": {Status: 200, Location: "u2"}, "k2": {Status: 404}, "k3": {Status: 404}},
		Resolves: map[string]map[string]Read{
			"n1": {"k1": {Status: 302, Location: "u2"}, "k2": {Status: 410}, "k3": {Status: 404}},
			"n2": {"k1": {Status: 302, Location: "u2"}, "k2": {Status: 410}, "k3": {Status: 410}},
		}}
	if r := CheckConverge(ops, final); r.Valid != Valid {
		t.Fatalf("converged judged %v: %+v", r.Valid, r)
	}
	// A stale URL, a resurrected delete, and a lost tombstone.
	final.Resolves["n2"]["k1"] = Read{Status: 302, Location: "u1"}
	final.Resolves["n1"]["k2"] = Read{Status: 302, Location: "u0"}
	final.Resolves["n2"]["k2"] = Read{Status: 404}
	r := CheckConverge(ops, final)
	kinds := map[string]int{}
	for _, a := range r.Anomalies {
		kinds[a.Kind]++
	}
	if r.Valid != Invalid || kinds["stale-after-bound"] != 2 || kinds["tombstone-lost"] != 1 {
		t.Fatalf("stale nodes judged %v: %+v", r.Valid, r)
	}
	// A redirect probe that answers 404 after the acknowledged delete.
	probe := append(append([]history.Op(nil), ops...), build(
		row{p: 3, typ: history.Invoke, f: FResolve, key: "k2", node: "n1"},
		row{p: 3, typ: history.OK, f: FResolve, key: "k2", status: 404, node: "n1"})...)
	for i := range probe {
		probe[i].Index, probe[i].Time = i, int64(i*10)
	}
	final.Resolves["n1"]["k2"], final.Resolves["n2"]["k2"], final.Resolves["n2"]["k1"] = Read{Status: 410}, Read{Status: 410}, Read{Status: 302, Location: "u2"}
	if r := CheckConverge(probe, final); r.Valid != Invalid || r.AnomalyCount != 1 || r.Anomalies[0].Kind != "tombstone-lost" {
		t.Fatalf("a 404 probe of a tombstone judged %v: %+v", r.Valid, r)
	}
	// k3's create was indeterminate, but the final read found its
	// tombstone (410): a node answering 404 for it lost the tombstone.
	final.Resolves["n2"]["k1"] = Read{Status: 302, Location: "u2"}
	final.Truth["k3"] = Read{Status: 410}
	if r := CheckConverge(ops, final); r.Valid != Invalid || r.AnomalyCount != 1 || r.Anomalies[0].Kind != "tombstone-lost" {
		t.Fatalf("a 404 for a code the final read found deleted judged %v: %+v", r.Valid, r)
	}
	final.Resolves["n1"]["k3"] = Read{Status: 410}
	if r := CheckConverge(ops, final); r.Valid != Valid {
		t.Fatalf("every node answering 410 for a deleted code judged %v: %+v", r.Valid, r)
	}
}

func TestCounter(t *testing.T) {
	t.Parallel()
	var rows []row
	for i := range 10 { // ten acknowledged clicks on n1
		rows = append(rows, row{p: i, typ: history.Invoke, f: FClick, key: "c", wl: "counter", node: "n1"},
			row{p: i, typ: history.OK, f: FClick, key: "c", status: 302, wl: "counter", node: "n1"})
	}
	rows = append(rows, row{p: 20, typ: history.Invoke, f: FRead, key: "c", wl: "counter", node: "n2"},
		row{p: 20, typ: history.OK, f: FRead, key: "c", value: "10", wl: "counter", node: "n2"})
	ops := build(rows...)
	final := func(v uint64) Final {
		return Final{Nodes: []string{"n1", "n2"}, Recovered: true, Counters: map[string]map[string]uint64{"n1": {"c": v}, "n2": {"c": v}}}
	}
	if r := CheckCounter(ops, final(10), CounterOptions{}); r.Valid != Valid {
		t.Fatalf("exact count judged %v: %+v", r.Valid, r)
	}
	if r := CheckCounter(ops, final(11), CounterOptions{}); r.Valid != Invalid || r.Anomalies[0].Kind != "over-count" {
		t.Fatalf("over-count judged %v: %+v", r.Valid, r)
	}
	if r := CheckCounter(ops, final(7), CounterOptions{}); r.Valid != Invalid || r.Anomalies[0].Kind != "lost-clicks" {
		t.Fatalf("lost clicks without a kill judged %v: %+v", r.Valid, r)
	}
	// A read during the run above everything invoked so far.
	over := append(append([]history.Op(nil), ops...), build(
		row{p: 21, typ: history.Invoke, f: FRead, key: "c", wl: "counter", node: "n2"},
		row{p: 21, typ: history.OK, f: FRead, key: "c", value: "12", wl: "counter", node: "n2"})...)
	for i := range over {
		over[i].Index, over[i].Time = i, int64(i*10)
	}
	if r := CheckCounter(over, final(10), CounterOptions{}); r.Valid != Invalid {
		t.Fatalf("over-counting read judged %v", r.Valid)
	}
	// Clicks served by n1 just before it was killed may be lost.
	killed := append(append([]history.Op(nil), ops...), history.Op{Process: history.NemesisProcess, Type: history.OK, F: "start", Value: "SIGKILL n1"})
	for i := range killed {
		killed[i].Index, killed[i].Time = i, int64(i*10)
	}
	if r := CheckCounter(killed, final(7), CounterOptions{LossWindow: time.Second}); r.Valid != Valid {
		t.Fatalf("loss within the kill window judged %v: %+v", r.Valid, r)
	}
	// A power cut kills every node it names; a cut to n2 alone does not
	// excuse n1's losses.
	for value, want := range map[string]Validity{
		"power cut to n1 n2: SIGKILL, then unsynced writes dropped": Valid,
		"power cut to n2: SIGKILL, then unsynced writes dropped":    Invalid,
		"SIGKILL n2 (while cut off)":                                Invalid,
	} {
		cut := slices.Clone(killed)
		cut[len(cut)-1].Value = value
		if r := CheckCounter(cut, final(7), CounterOptions{LossWindow: time.Second}); r.Valid != want {
			t.Fatalf("losses on n1 after %q judged %v, want %v: %+v", value, r.Valid, want, r)
		}
	}
}

// TestCounterWindowStartsWhenTheNodeCanCommit: n1 serves clicks while a
// fault may keep it from committing them, and is killed later. Within the
// recovery after the fault's end plus the loss window, losing them is
// allowed; past that, n1 could commit them, and losing them is an
// anomaly, as is losing clicks served long after the fault.
func TestCounterWindowStartsWhenTheNodeCanCommit(t *testing.T) {
	t.Parallel()
	const s = int64(time.Second)
	nemesis := func(at int64, f string, typ history.Type, value string) history.Op {
		return history.Op{Time: at, Process: history.NemesisProcess, Type: typ, F: f, Workload: "kill-majority", Value: value}
	}
	clicks := func(from int64) []history.Op { // five clicks on n1
		var ops []history.Op
		for i := range 5 {
			at := from + int64(i)*s/10
			ops = append(ops, history.Op{Time: at, Process: i, Type: history.Invoke, F: FClick, Key: "c", Workload: "counter", Node: "n1"},
				history.Op{Time: at + 1, Process: i, Type: history.OK, F: FClick, Key: "c", Status: 302, Workload: "counter", Node: "n1"})
		}
		return ops
	}
	fault := []history.Op{nemesis(1*s, "start", history.Invoke, ""), nemesis(1*s, "start", history.OK, "SIGKILL n2 n3"),
		nemesis(6*s, "stop", history.Invoke, ""), nemesis(6*s, "stop", history.OK, "n2 killed by SIGKILL; n3 killed by SIGKILL")}
	kill := func(at int64) []history.Op {
		return []history.Op{nemesis(at, "start", history.Invoke, ""), nemesis(at, "start", history.OK, "SIGKILL n1")}
	}
	final := Final{Nodes: []string{"n1"}, Recovered: true, Counters: map[string]map[string]uint64{"n1": {"c": 2}}}
	for _, c := range []struct {
		name     string
		recovery time.Duration
		ops      []history.Op
		valid    Validity
	}{
		{"served during the fault, killed within recovery and the window after it", 5 * time.Second, slices.Concat(fault[:2], clicks(2*s), fault[2:], kill(13*s)), Valid},
		{"served during the fault, killed after recovery and the window", 5 * time.Second, slices.Concat(fault[:2], clicks(2*s), fault[2:], kill(15*s)), Invalid},
		{"served after recovery, killed past the window", 5 * time.Second, slices.Concat(fault, clicks(12*s), kill(16*s)), Invalid},
		{"served during the fault, no recovery allowed, killed past the window after it", 0, slices.Concat(fault[:2], clicks(2*s), fault[2:], kill(10*s)), Invalid},
	} {
		o := CounterOptions{LossWindow: 3 * time.Second, Recovery: c.recovery}
		if r := CheckCounter(c.ops, final, o); r.Valid != c.valid || (c.valid == Invalid && r.Anomalies[0].Kind != "lost-clicks") {
			t.Errorf("%s: judged %v, want %v: %+v", c.name, r.Valid, c.valid, r)
		}
	}
}

// TestBackup: the backup checker finds a create acknowledged before the
// backup missing or changed on the restored node, a code made again, a
// backup that does not restore; a create acknowledged after the backup
// began may be missing, and its code made again.
func TestBackup(t *testing.T) {
	t.Parallel()
	nem := history.NemesisProcess
	ops := build(
		row{p: 0, typ: history.Invoke, f: FCreate, value: "P/set/1", wl: "set"},
		row{p: 0, typ: history.OK, f: FCreate, key: "a", value: "P/set/1", status: 201, wl: "set"},
		row{p: 1, typ: history.Invoke, f: FCreate, value: "P/ryw/1", wl: "ryw"},
		row{p: 1, typ: history.OK, f: FCreate, key: "b", value: "P/ryw/1", status: 201, wl: "ryw"},
		row{p: nem, typ: history.OK, f: FBackupStart, node: "n1"},
		row{p: nem, typ: history.Fail, f: FBackupDone, node: "n1"},
		row{p: nem, typ: history.OK, f: FBackupStart, node: "n2"},
		row{p: 2, typ: history.Invoke, f: FCreate, value: "P/set/2", wl: "set"},
		row{p: 2, typ: history.OK, f: FCreate, key: "c", value: "P/set/2", status: 201, wl: "set"},
		row{p: nem, typ: history.OK, f: FBackupDone, node: "n2"},
		row{p: 0, typ: history.Invoke, f: FCreate, value: "P/set/3", wl: "set"},
		row{p: 0, typ: history.OK, f: FCreate, key: "d", value: "P/set/3", status: 201, wl: "set"},
	)
	good := func() *BackupState {
		return &BackupState{File: "backup.lrbk", Errors: []string{"n1: no leader"}, Restore: "restored",
			Resolves: map[string]Read{"a": {Status: 302, Location: "P/set/1"}, "b": {Status: 302, Location: "P/ryw/1"},
				"c": {Status: 404}, "d": {Status: 404}},
			Issued: []string{"d", "e"}}
	}
	if r := CheckBackup(ops, good()); r.Valid != Valid || r.Stats["acknowledged_before"] != 2 {
		t.Fatalf("good judged %v: %+v", r.Valid, r)
	}
	for _, tc := range []struct {
		name string
		bend func(*BackupState)
		want string
	}{
		{"lost", func(b *BackupState) { b.Resolves["a"] = Read{Status: 404} }, "lost-in-backup"},
		{"changed", func(b *BackupState) { b.Resolves["b"] = Read{Status: 302, Location: "P/other"} }, "wrong-url-in-backup"},
		{"reissued-held", func(b *BackupState) {
			b.Resolves["c"] = Read{Status: 302, Location: "P/set/2"}
			b.Issued = []string{"c"}
		}, "reissued"},
		{"reissued-acknowledged", func(b *BackupState) { b.Issued = []string{"a"} }, "reissued"},
		{"refused", func(b *BackupState) { b.IssueErrors = 3 }, "restored-refuses-creates"},
	} {
		b := good()
		tc.bend(b)
		if r := CheckBackup(ops, b); r.Valid != Invalid || r.Anomalies[0].Kind != tc.want {
			t.Errorf("%s judged %v: %+v", tc.name, r.Valid, r)
		}
	}
	b := good()
	b.RestoreError = "linknode restore: exit status 1: damaged"
	if r := CheckBackup(ops, b); r.Valid != Invalid {
		t.Errorf("a backup that does not restore judged %v", r.Valid)
	}
	if r := CheckBackup(ops, &BackupState{Errors: []string{"n1: x", "n2: y"}}); r.Valid != Unknown {
		t.Errorf("no backup taken judged %v", r.Valid)
	}
	b = good()
	delete(b.Resolves, "a")
	if r := CheckBackup(ops, b); r.Valid != Unknown {
		t.Errorf("an unread code judged %v", r.Valid)
	}
}
