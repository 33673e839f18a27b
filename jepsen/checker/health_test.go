package checker

import (
	"testing"

	"github.com/linkraft/linkraft/jepsen/history"
)

func kinds(r Result) map[string]int {
	out := map[string]int{}
	for _, a := range r.Anomalies {
		out[a.Kind]++
	}
	return out
}

func TestNodes(t *testing.T) {
	t.Parallel()
	good := []NodeRun{
		{Node: "n1", Run: 1, PID: 10, Exited: true, ExitCode: -1, Signal: "killed", Cause: CauseNemesis},
		{Node: "n1", Run: 2, PID: 11, Exited: true, ExitCode: 0, Cause: CauseStop, Stopping: 1e9, Ended: 13e9},
		{Node: "n2", Run: 1, PID: 12, Exited: true, ExitCode: 0, Cause: CauseStop, Stopping: 1e9, Ended: 2.5e9},
	}
	r := CheckNodes(good)
	if r.Valid != Valid || r.Stats["killed-by-nemesis"] != 1 || r.Stats["stopped-cleanly"] != 2 ||
		r.Stats["slowest-stop-ms"] != 12000 || r.Stats["stops-over-10s"] != 1 {
		t.Fatalf("healthy runs judged %v: %+v", r.Valid, r)
	}
	bad := append(good,
		NodeRun{Node: "n3", Run: 1, PID: 13, Exited: true, ExitCode: 3, LastLog: []string{"bye"}},                   // died on its own
		NodeRun{Node: "n3", Run: 2, PID: 14, Exited: true, ExitCode: -1, Signal: "segmentation fault"},              // crashed by a signal
		NodeRun{Node: "n4", Run: 1, StartError: "fork/exec: no such file"},                                          // never started
		NodeRun{Node: "n5", Run: 1, PID: 15, Exited: true, ExitCode: 1, Cause: CauseStop},                           // shutdown failed
		NodeRun{Node: "n5", Run: 2, PID: 16, Exited: true, ExitCode: -1, Signal: "killed", Cause: CauseStopTimeout}, // hung
		NodeRun{Node: "n2", Run: 2, PID: 17, Exited: true, ExitCode: 2, Cause: CauseNemesis},                        // died before the kill landed
	)
	r = CheckNodes(bad)
	k := kinds(r)
	if r.Valid != Invalid || k["unexpected-exit"] != 3 || k["start-failed"] != 1 || k["unclean-shutdown"] != 1 || k["shutdown-hung"] != 1 {
		t.Fatalf("bad runs judged %v: %+v", r.Valid, r)
	}
}

func TestNemesisShowsFaultsHappened(t *testing.T) {
	t.Parallel()
	records := []FaultRecord{
		{Fault: "partition-one", Injected: true, Effective: true, Effect: "dropped 40 packets"},
		{Fault: "kill-leader", NoTarget: true, Error: "no target"},
		{Fault: "pause-one", Injected: true, Effective: false, Effect: "n1 not stopped"},
	}
	r := CheckNemesis([]string{"partition-one", "kill-leader", "pause-one"}, records)
	if r.Valid != Valid || r.Stats["effective"] != 1 || r.Stats["no-target"] != 1 || r.Stats["injected"] != 2 {
		t.Fatalf("run with an effective fault judged %v: %+v", r.Valid, r)
	}
	sum := SummarizeFaults(records)
	if sum["kill-leader"].NoTarget != 1 || sum["partition-one"].Effects[0] != "dropped 40 packets" {
		t.Fatalf("summary %+v", sum)
	}
	// Faults asked for, none took effect: the run tested nothing.
	if r := CheckNemesis([]string{"kill-leader", "pause-one"}, records[1:]); r.Valid != Unknown {
		t.Fatalf("run without an effective fault judged %v: %+v", r.Valid, r)
	}
	if r := CheckNemesis(nil, nil); r.Valid != Valid {
		t.Fatalf("run without faults asked for judged %v", r.Valid)
	}
	// A hostile fault whose attack got an answer: the trust boundary
	// failed, whatever else happened.
	breach := append(records, FaultRecord{Fault: "hostile", Injected: true, Effective: true, Breach: true,
		Effect: "40 attacks, 40 reached a port, 1 answered (BREACH: plain RPC apply on n2 got an answer)"})
	if r := CheckNemesis([]string{"partition-one", "hostile"}, breach); r.Valid != Invalid || len(r.Anomalies) != 1 || r.Anomalies[0].Kind != "breach" {
		t.Fatalf("a breach judged %v: %+v", r.Valid, r)
	}
}

func TestReplicas(t *testing.T) {
	t.Parallel()
	d := func(g string, index uint64, sum string) GroupDigest {
		return GroupDigest{Group: g, AppliedIndex: index, Items: 3, Digest: sum}
	}
	final := Final{Recovered: true,
		Replicas: map[string][]string{"meta": {"n1", "n2", "n3"}, "0": {"n1", "n2", "n3"}, "1": {"n2", "n3"}},
		Digests: map[string][]GroupDigest{
			"n1": {d("meta", 50, "aa"), d("0", 10, "bb")},
			"n2": {d("meta", 50, "aa"), d("0", 10, "bb"), d("1", 7, "cc")},
			"n3": {d("meta", 50, "aa"), d("0", 10, "bb"), d("1", 7, "cc")},
		}}
	if r := CheckReplicas(final); r.Valid != Valid || r.Stats["groups-compared"] != 3 || r.Stats["replicas-compared"] != 8 {
		t.Fatalf("equal replicas judged %v: %+v", r.Valid, r)
	}
	// n3 lost a write of shard 0 that its applied index counts.
	final.Digests["n3"][1] = d("0", 10, "b0")
	// n1 is a member of shard 1's group but has no replica of it.
	final.Replicas["1"] = []string{"n1", "n2", "n3"}
	r := CheckReplicas(final)
	if k := kinds(r); r.Valid != Invalid || k["replicas-diverged"] != 1 || k["missing-replica"] != 1 {
		t.Fatalf("diverged replicas judged %v: %+v", r.Valid, r)
	}
	// Replicas not at one applied index cannot be compared: unknown.
	final.Replicas["1"] = []string{"n2", "n3"}
	final.Digests["n3"][1] = d("0", 11, "b0")
	if r := CheckReplicas(final); r.Valid != Unknown || r.Stats["unsettled-groups"] != 1 {
		t.Fatalf("unsettled replicas judged %v: %+v", r.Valid, r)
	}
}

// A start granted twice (by a buggy meta FSM) shows as two grants in the
// history, and they overlap.
func TestUniqueIDsSeesARegrant(t *testing.T) {
	t.Parallel()
	leases := map[string][]Lease{
		"n1": {{Index: 5, Start: 0, End: 10, Node: "n1"}, {Index: 9, Start: 0, End: 10, Node: "n2"}},
		"n2": {{Index: 5, Start: 0, End: 10, Node: "n1"}, {Index: 9, Start: 0, End: 10, Node: "n2"}},
	}
	ops := build(
		row{p: 0, typ: history.Invoke, f: FCreate, value: "P/set/1", wl: "set", node: "n1"},
		row{p: 0, typ: history.OK, f: FCreate, key: "3", value: "P/set/1", status: 201, wl: "set", node: "n1"},
	)
	decode := func(c string) (uint64, error) { return uint64(c[0] - '0'), nil }
	r := CheckUniqueIDs(ops, Final{Leases: leases}, decode)
	if r.Valid != Invalid || kinds(r)["overlapping-leases"] != 1 {
		t.Fatalf("a start granted twice judged %v: %+v", r.Valid, r)
	}
}
