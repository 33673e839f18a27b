package raft

import (
	"testing"
	"time"
)

// linkraft's fourth patch (LINKRAFT.md): a snapshot older than the
// follower's log leaves the configurations that follow it in the log the
// latest. Unpatched, the follower's latest configuration went back to the
// snapshot's: linkraft's chaos run saw such a follower, made leader by a
// leadership transfer, count votes by a membership the group had left and
// then remove itself from its group.
func TestLinkraftOlderSnapshotKeepsLaterConfiguration(t *testing.T) {
	conf := inmemConfig(t)
	conf.TrailingLogs = 1000 // the entries after the snapshot stay
	c := MakeCluster(3, t, conf)
	defer c.Close()
	leader := c.Leader()
	for range 10 {
		if err := leader.Apply([]byte("x"), time.Second).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if err := leader.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	// A change of membership after the snapshot, in every log.
	if err := leader.AddNonvoter("extra", "extra-addr", 0, time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	follower := c.Followers()[0]
	hasExtra := func(conf Configuration) bool { return inConfiguration(conf, "extra") }
	waitConfiguration(t, c, follower, "the new configuration", hasExtra)

	// The leader sends its snapshot, older than the follower's log, as it
	// does when it lost track of the follower.
	snaps, err := leader.snapshots.List()
	if err != nil || len(snaps) == 0 {
		t.Fatalf("snapshots: %v, %v", snaps, err)
	}
	meta, rc, err := leader.snapshots.Open(snaps[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if last := follower.LastIndex(); meta.Index >= last {
		t.Fatalf("snapshot at %d, follower's log at %d: not older", meta.Index, last)
	}
	req := InstallSnapshotRequest{
		RPCHeader:          leader.getRPCHeader(),
		SnapshotVersion:    meta.Version,
		Term:               leader.getCurrentTerm(),
		Leader:             leader.trans.EncodePeer(leader.localID, leader.localAddr),
		LastLogIndex:       meta.Index,
		LastLogTerm:        meta.Term,
		Peers:              meta.Peers,
		Size:               meta.Size,
		Configuration:      EncodeConfiguration(meta.Configuration),
		ConfigurationIndex: meta.ConfigurationIndex,
	}
	var resp InstallSnapshotResponse
	if err := leader.trans.InstallSnapshot(follower.localID, follower.localAddr, &req, &resp, rc); err != nil {
		t.Fatal(err)
	}
	if !resp.Success {
		t.Fatal("the follower refused the snapshot")
	}
	if !hasExtra(c.getConfiguration(follower)) {
		t.Fatal("after an older snapshot the follower's latest configuration lost the change that follows it in its log")
	}
}

// A leadership transfer to a server that is not a voter in its own view
// is refused rather than making it a candidate (linkraft's fourth patch,
// its second half).
func TestLinkraftNonvoterRefusesTimeoutNow(t *testing.T) {
	c := MakeCluster(3, t, inmemConfig(t))
	defer c.Close()
	leader := c.Leader()
	follower := c.Followers()[0]
	if err := leader.DemoteVoter(follower.localID, 0, time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	waitConfiguration(t, c, follower, "its demotion", func(conf Configuration) bool {
		return !hasVote(conf, follower.localID)
	})
	var resp TimeoutNowResponse
	err := leader.trans.TimeoutNow(follower.localID, follower.localAddr, &TimeoutNowRequest{RPCHeader: leader.getRPCHeader()}, &resp)
	if err == nil {
		t.Fatal("a non-voter took a TimeoutNow")
	}
	if s := follower.getState(); s != Follower {
		t.Fatalf("the non-voter is %v after refusing", s)
	}
}

// waitConfiguration polls r's latest configuration until ok holds (up to
// 5 s), failing the test with what it waited for.
func waitConfiguration(t *testing.T, c *cluster, r *Raft, what string, ok func(Configuration) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok(c.getConfiguration(r)) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never took up %s", r.localID, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// blockingFSM blocks in Apply until release is closed, and records that
// an Apply returned.
type blockingFSM struct {
	MockFSM
	entered  chan struct{}
	release  chan struct{}
	returned chan struct{}
}

func (f *blockingFSM) Apply(l *Log) any {
	close(f.entered)
	<-f.release
	defer close(f.returned)
	return f.MockFSM.Apply(l)
}

// A Shutdown after raft shut itself down waits for raft's goroutines, as
// the first one's future does (linkraft's fifth patch). Unpatched, its
// future returned at once: a caller that then closed the log and the
// state file, and opened them again, raced a goroutine still applying.
func TestLinkraftShutdownAgainWaitsForTheGoroutines(t *testing.T) {
	fsm := &blockingFSM{entered: make(chan struct{}), release: make(chan struct{}), returned: make(chan struct{})}
	c := MakeClusterCustom(t, &MakeClusterOpts{Peers: 1, Bootstrap: true, Conf: inmemConfig(t),
		MakeFSMFunc: func() FSM { return fsm }})
	defer c.Close()
	r := c.Leader()
	r.Apply([]byte("blocks"), 0)
	<-fsm.entered
	// As a leader removing itself does: the first future is dropped.
	r.Shutdown()
	returned := make(chan struct{})
	var appliedFirst bool
	go func() {
		_ = r.Shutdown().Error()
		select {
		case <-fsm.returned:
			appliedFirst = true
		default:
		}
		close(returned)
	}()
	// The FSM goroutine is held in Apply: the second future must not
	// return before it is let go.
	select {
	case <-returned:
		t.Fatal("the second Shutdown's future returned while the FSM goroutine was still applying")
	case <-time.After(200 * time.Millisecond):
	}
	close(fsm.release)
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("the second Shutdown's future never returned")
	}
	if !appliedFirst {
		t.Fatal("the second Shutdown's future returned before the FSM goroutine's Apply did")
	}
}
