package raftgroup

import (
	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/internal/crashpoint"
)

// crashLogs wraps a group's log store with the log-stored crash point
// (internal/crashpoint): after entries are fsynced in the log, before the
// state machine has them. Only jepsencrash builds wrap; others get the
// store itself.
func crashLogs(s raft.LogStore) raft.LogStore {
	if !crashpoint.Built {
		return s
	}
	return crashLogStore{s}
}

// crashLogStore is a log store whose stores reach the log-stored point.
type crashLogStore struct{ raft.LogStore }

// StoreLog stores l, then reaches the crash point.
func (s crashLogStore) StoreLog(l *raft.Log) error {
	return s.StoreLogs([]*raft.Log{l})
}

// StoreLogs stores logs, then reaches the crash point.
func (s crashLogStore) StoreLogs(logs []*raft.Log) error {
	if err := s.LogStore.StoreLogs(logs); err != nil {
		return err
	}
	crashpoint.Hit(crashpoint.LogStored)
	return nil
}

// IsMonotonic passes the wrapped store's answer on (raft.MonotonicLogStore).
func (s crashLogStore) IsMonotonic() bool {
	m, ok := s.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}
