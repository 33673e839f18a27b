package raftgroup

import (
	"path/filepath"
	"testing"

	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/transport"
)

// mustGroup opens a group over the meta FSM (any StateMachine would do)
// on the mux's first Raft layer.
func mustGroup(tb testing.TB, m *transport.Mux, nodeID string) *Group {
	tb.Helper()
	dir := tb.TempDir()
	f, err := fsm.NewMetaFSM(fsm.MetaConfig{Path: filepath.Join(dir, "state.db")})
	if err != nil {
		tb.Fatal(err)
	}
	layer, err := m.Layer(transport.KindRaft, 1)
	if err != nil {
		tb.Fatal(err)
	}
	g, err := Open(Config{Name: "test", NodeID: nodeID, Dir: dir, FSM: f, Stream: transport.RaftLayer{Layer: layer}, Timing: FastTiming})
	if err != nil {
		f.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() { g.Close() })
	return g
}
