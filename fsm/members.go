package fsm

import (
	"errors"
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

// ErrIncarnation is the result of registering a known node ID with another
// incarnation.
var ErrIncarnation = errors.New("fsm: node id already registered with another incarnation")

// RegisterResult answers a RegisterNode: the incarnation on record (the
// new one, or the one that refused it) and Err.
type RegisterResult struct {
	Incarnation string
	Err         error
}

func (f *MetaFSM) applyRegister(tx *bolt.Tx, r *command.RegisterNode) any {
	b := tx.Bucket(bucketMembers)
	if v := b.Get([]byte(r.Node)); v != nil {
		inc, _ := decodeMember(v)
		if inc != r.Incarnation {
			return &RegisterResult{Incarnation: inc, Err: fmt.Errorf("%w: %s is %s, not %s", ErrIncarnation, r.Node, inc, r.Incarnation)}
		}
		return &RegisterResult{Incarnation: inc}
	}
	v := (&command.RegisterNode{Incarnation: r.Incarnation, At: r.At}).AppendTo(nil)
	if err := b.Put([]byte(r.Node), v); err != nil {
		panic(fmt.Sprintf("fsm %s: put member: %v", f.path, err))
	}
	return &RegisterResult{Incarnation: r.Incarnation}
}

func decodeMember(v []byte) (string, time.Time) {
	var r command.RegisterNode
	if err := r.Unmarshal(v); err != nil {
		return "", time.Time{}
	}
	return r.Incarnation, r.At
}

// Incarnation returns the incarnation registered for node id, if any.
func (f *MetaFSM) Incarnation(id string) (string, bool, error) {
	var inc string
	var ok bool
	err := f.view(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMembers).Get([]byte(id)); v != nil {
			inc, _ = decodeMember(v)
			ok = true
		}
		return nil
	})
	return inc, ok, err
}
