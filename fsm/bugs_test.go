//go:build jepsenbugs

package fsm

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/bugs"
	"github.com/linkraft/linkraft/link"
)

// With lose-last-apply-on-restart on, the closed state file can be made to
// forget its last writes, newest first, while its applied index stays.
func TestUndoLastWrites(t *testing.T) {
	if !bugs.On(bugs.LoseLastApply) {
		t.Skipf("run with %s=%s", bugs.Env, bugs.LoseLastApply)
	}
	path := filepath.Join(t.TempDir(), "state.db")
	f, err := NewShardFSM(ShardConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	applyAt(t, f, 1, (&command.CreateIfAbsent{Code: "abc", Now: t0, Nonce: 1, Request: link.CreateRequest{URL: "https://example.com/1"}}).Encode())
	applyAt(t, f, 2, (&command.CreateIfAbsent{Code: "abd", Now: t0, Nonce: 2, Request: link.CreateRequest{URL: "https://example.com/2"}}).Encode())
	applyAt(t, f, 3, (&command.Update{Code: "abc", Now: t0, Patch: link.Patch{URL: new("https://example.com/1b")}}).Encode())
	applyAt(t, f, 4, (&command.CreateIfAbsent{Code: "abe", Now: t0, Nonce: 3, Request: link.CreateRequest{URL: "https://example.com/3"}}).Encode())
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	codes, err := UndoLastWrites(path, 2)
	if err != nil || !slices.Equal(codes, []string{"abe", "abc"}) {
		t.Fatalf("undone %v, %v", codes, err)
	}
	f, err = NewShardFSM(ShardConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if f.AppliedIndex() != 4 {
		t.Fatalf("applied index %d after the undo, want 4", f.AppliedIndex())
	}
	if _, err := f.Get("abe"); !errors.Is(err, link.ErrNotFound) {
		t.Fatalf("the undone create is still there: %v", err)
	}
	if l, _ := f.Get("abc"); l == nil || l.URL != "https://example.com/1" {
		t.Fatalf("the undone update left %+v", l)
	}
	if l, _ := f.Get("abd"); l == nil || l.URL != "https://example.com/2" {
		t.Fatalf("a write before the undone ones is gone: %+v", l)
	}
	// The undone create's index entry went with it (a listing once failed
	// on the entry of a link the undo had removed).
	res, err := f.ListLinks(link.ListQuery{Limit: 10})
	ls := res.Links
	if err != nil || len(ls) != 2 || ls[0].Code != "abc" || ls[1].Code != "abd" {
		t.Fatalf("listing after the undo: %d links, %v", len(ls), err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if codes, err := UndoLastWrites(path, 2); err != nil || len(codes) != 0 {
		t.Fatalf("a second undo without new writes undid %v (%v)", codes, err)
	}
}
