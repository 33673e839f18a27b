package raftgroup

import (
	"bytes"
	"errors"
	"io"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm"
)

// StateSource is an FSM whose snapshots are fsm.LiveStateMarker: it streams
// its current state, with the exact size, when a snapshot is to be sent.
type StateSource interface {
	OpenState() (int64, io.ReadCloser, error)
}

// liveSnapshots is raft's file snapshot store for an FSM that snapshots by
// marker (see fsm.LiveStateMarker). A snapshot raft took here is a few
// bytes on disk; when raft opens it — to send it to a follower that is too
// far behind — it gets a copy of the FSM's live state instead (OpenState),
// which holds every entry up to the snapshot's index and maybe a few more.
// While that copy is out the FSM refuses to snapshot, so the log entries
// after the snapshot's index, which the follower needs next, stay. That is safe: the
// follower's FSM records the index its state includes and skips the log
// entries at or below it that raft then replays, and the entries are the
// same committed ones everywhere. A snapshot received from a leader is
// stored whole, as raft writes it, and opened as it is.
type liveSnapshots struct {
	*raft.FileSnapshotStore
	src StateSource
}

// Open implements raft.SnapshotStore.
func (s *liveSnapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.FileSnapshotStore.Open(id)
	if err != nil {
		return nil, nil, err
	}
	head := make([]byte, len(fsm.LiveStateMarker))
	n, err := io.ReadFull(rc, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		rc.Close()
		return nil, nil, err
	}
	if string(head[:n]) != fsm.LiveStateMarker {
		return meta, struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head[:n]), rc), rc}, nil
	}
	rc.Close()
	size, live, err := s.src.OpenState()
	if err != nil {
		return nil, nil, err
	}
	m := *meta
	m.Size = size
	return &m, live, nil
}
