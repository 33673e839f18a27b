package fsm

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/command"
)

// The meta group keeps a registry of the cluster's members: each node ID
// with the incarnation of its data dir (random, made with the data dir).
// A node that comes back under a known ID with another incarnation has
// lost its state (a wiped or replaced disk): it may have voted in a term it
// no longer remembers, so it must not take part again under that ID. The
// cluster refuses it, at membership and at every peer-port handshake
// (cluster and internal/peertls), until an operator removes the old node.

var bucketMembers = []byte("members") // node id -> incarnation, registered at

func (f *MetaFSM) applyRegister(tx *bolt.Tx, r *command.RegisterNode) (any, error) {
	b := tx.Bucket(bucketMembers)
	if v := b.Get([]byte(r.Node)); v != nil {
		inc, _ := decodeMember(v)
		if inc != r.Incarnation {
			return &command.RegisterResult{Incarnation: inc, Err: fmt.Errorf("%w: %s is %s, not %s", command.ErrIncarnation, r.Node, inc, r.Incarnation)}, nil
		}
		return &command.RegisterResult{Incarnation: inc}, nil
	}
	v := (&command.RegisterNode{Incarnation: r.Incarnation, At: r.At}).AppendTo(nil)
	if err := b.Put([]byte(r.Node), v); err != nil {
		return nil, fmt.Errorf("put member: %w", err)
	}
	return &command.RegisterResult{Incarnation: r.Incarnation}, nil
}

// applyAdmit registers a.Member as applyRegister does and records its
// feature level. A node known under another incarnation is refused, its
// record untouched.
func (f *MetaFSM) applyAdmit(tx *bolt.Tx, a *command.AdmitNode) (any, error) {
	b := tx.Bucket(bucketMembers)
	rec := command.RegisterNode{Incarnation: a.Member.Incarnation, At: a.Member.At, Level: a.Member.Level}
	if v := b.Get([]byte(a.Member.Node)); v != nil {
		var old command.RegisterNode
		_ = old.Unmarshal(v)
		if old.Incarnation != a.Member.Incarnation {
			return &command.RegisterResult{Incarnation: old.Incarnation, Err: fmt.Errorf("%w: %s is %s, not %s", command.ErrIncarnation, a.Member.Node, old.Incarnation, a.Member.Incarnation)}, nil
		}
		rec.At = old.At // registered at: the first time
	}
	if err := b.Put([]byte(a.Member.Node), rec.AppendTo(nil)); err != nil {
		return nil, fmt.Errorf("put member: %w", err)
	}
	return &command.RegisterResult{Incarnation: rec.Incarnation}, nil
}

func decodeMember(v []byte) (string, time.Time) {
	var r command.RegisterNode
	if err := r.Unmarshal(v); err != nil {
		return "", time.Time{}
	}
	return r.Incarnation, r.At
}

// Member is a node of the registry.
type Member struct {
	ID          string
	Incarnation string
	// Level is the feature level recorded when the node was last
	// admitted; 0 if it was registered by a version that did not record
	// levels and has not been admitted since.
	Level        int
	RegisteredAt time.Time
}

// Members returns the registry, in node ID order.
func (f *MetaFSM) Members() ([]Member, error) {
	var out []Member
	err := f.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMembers).ForEach(func(k, v []byte) error {
			var r command.RegisterNode
			if err := r.Unmarshal(v); err != nil {
				return fmt.Errorf("fsm: member %q: %w", k, err)
			}
			out = append(out, Member{ID: string(k), Incarnation: r.Incarnation, Level: int(r.Level), RegisteredAt: r.At})
			return nil
		})
	})
	return out, err
}

// Incarnation returns the incarnation registered for node id, if any.
func (f *MetaFSM) Incarnation(id string) (string, bool, error) {
	m, ok, err := f.Member(id)
	return m.Incarnation, ok, err
}

// Member returns node id's record in the registry, if any.
func (f *MetaFSM) Member(id string) (Member, bool, error) {
	var m Member
	var ok bool
	err := f.view(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMembers).Get([]byte(id)); v != nil {
			var r command.RegisterNode
			if err := r.Unmarshal(v); err != nil {
				return fmt.Errorf("fsm: member %q: %w", id, err)
			}
			m, ok = Member{ID: id, Incarnation: r.Incarnation, Level: int(r.Level), RegisteredAt: r.At}, true
		}
		return nil
	})
	return m, ok, err
}
