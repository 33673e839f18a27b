package fsm

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/internal/tmpfs"
	"github.com/linkraft/linkraft/link"
)

// TestFullDiskStallsAndResumes: a commit that fails for a full disk is
// retried, never skipped and never a panic; the store reports the stall,
// takes no snapshot meanwhile, and carries on by itself when space returns.
func TestFullDiskStallsAndResumes(t *testing.T) {
	dir := tmpfs.Mount(t, "4m")
	var mu sync.Mutex
	changed := map[string]bool{}
	f, err := NewShardFSM(ShardConfig{Path: filepath.Join(dir, "shard.db"), OnChange: func(l *link.Link) {
		mu.Lock()
		changed[l.Code] = true
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	result(t, applyAt(t, f, 1, (&command.CreateIfAbsent{Code: "first", Request: link.CreateRequest{URL: "https://a.example/"}}).Encode()))
	filler := tmpfs.Fill(t, dir, 0)
	// Large values need new pages: the commit must write past the file's
	// allocated blocks.
	var logs []*raft.Log
	for i := range 8 {
		c := &command.CreateIfAbsent{Code: "big" + string(rune('a'+i)), Request: link.CreateRequest{URL: "https://a.example/" + strings.Repeat("x", 200<<10)}}
		logs = append(logs, &raft.Log{Index: uint64(2 + i), Type: raft.LogCommand, Data: c.Encode()})
	}
	done := make(chan []any, 1)
	go func() { done <- f.ApplyBatch(logs) }()
	testkit.WaitFor(t, 10*time.Second, "a stall reported on a full disk", func() bool {
		select {
		case out := <-done:
			t.Fatalf("the batch committed on a full disk: %v", out[0])
		default:
		}
		return f.Stalled() != nil
	})
	st := f.Stalled()
	if st.Index != 9 || !strings.Contains(st.Err, "no space") {
		t.Fatalf("stall %+v", st)
	}
	if f.AppliedIndex() != 1 {
		t.Fatalf("applied index moved to %d during the stall", f.AppliedIndex())
	}
	if _, err := f.Snapshot(); !errors.Is(err, ErrNotApplying) {
		t.Fatalf("snapshot during a stall: %v", err)
	}
	if _, err := f.Get("first"); err != nil {
		t.Fatalf("reads during a stall: %v", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	select {
	case out := <-done:
		for _, o := range out {
			result(t, o)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("apply did not resume after space returned")
	}
	if f.Stalled() != nil || f.AppliedIndex() != 9 {
		t.Fatalf("after the stall: %+v, applied %d", f.Stalled(), f.AppliedIndex())
	}
	if _, err := f.Get("bigh"); err != nil {
		t.Fatalf("the stalled batch's last create: %v", err)
	}
	// The retried batch's changes reach the cache hook once it commits
	// (applying it again must not drop them).
	mu.Lock()
	defer mu.Unlock()
	for i := range 8 {
		if code := "big" + string(rune('a'+i)); !changed[code] {
			t.Fatalf("%s was never delivered to OnChange: %v", code, changed)
		}
	}
}
