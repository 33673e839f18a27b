package raftgroup

import (
	"log/slog"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestElectionChatterIsDebug: a healthy election's messages (every group
// logs them as it starts) go out at DEBUG; an election after a leader was
// lost, and raft's other warnings, stay warnings.
func TestElectionChatterIsDebug(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		level hclog.Level
		msg   string
		args  []any
		want  slog.Level
	}{
		{hclog.Info, "entering candidate state", nil, slog.LevelDebug},
		{hclog.Info, "election won", []any{"term", 2}, slog.LevelDebug},
		{hclog.Warn, "heartbeat timeout reached, starting election", []any{"last-leader-addr", "", "last-leader-id", ""}, slog.LevelDebug},
		{hclog.Warn, "heartbeat timeout reached, starting election", []any{"last-leader-addr", "10.0.0.2:7000", "last-leader-id", "n2"}, slog.LevelWarn},
		{hclog.Warn, "failed to contact quorum of nodes, stepping down", nil, slog.LevelWarn},
		{hclog.Info, "updating configuration", nil, slog.LevelInfo},
	} {
		if got := levelOf(c.level, c.msg, c.args); got != c.want {
			t.Errorf("%q %v: %v, want %v", c.msg, c.args, got, c.want)
		}
	}
}
