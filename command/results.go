package command

import (
	"errors"
	"fmt"

	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/link"
)

// What the state machines answer to each command, as returned by
// raft.ApplyFuture.Response on the node that proposed it (and carried back
// by the peer RPC to a node that forwarded it). A business failure is a
// value in the result (Err), never a failed apply: the entry is applied
// alike on every replica, and only the proposer reads the answer.

// LinkResult answers a CreateIfAbsent, Update, Delete or ConsumeVisit: the
// link after the command, or why it did nothing (link.ErrAliasTaken,
// link.ErrNotFound, link.ErrDeleted, link.ErrGone).
type LinkResult struct {
	Link *link.Link
	Err  error
}

// BatchResult answers a CreateBatch: Results[i] belongs to Creates[i].
type BatchResult struct {
	Results []LinkResult
}

// LeaseResult answers a LeaseRange: the IDs [Start, End).
type LeaseResult struct {
	Start, End uint64
	Err        error
}

// ErrStalePlacement answers a SetPlacement whose version does not follow
// the stored one: someone changed the placement meanwhile.
var ErrStalePlacement = errors.New("placement changed concurrently")

// PlacementResult answers a SetPlacement: the placement in force.
type PlacementResult struct {
	Placement *Placement
	Err       error
}

// SettingsResult answers a SetSettings: the settings in force (the stored
// ones if settings existed already).
type SettingsResult struct {
	Settings *Settings
}

// ErrIncarnation answers a RegisterNode or AdmitNode of a node ID
// registered with another incarnation.
var ErrIncarnation = errors.New("node id already registered with another incarnation")

// RegisterResult answers a RegisterNode or AdmitNode: the incarnation on
// record (the new one, or the one that refused it).
type RegisterResult struct {
	Incarnation string
	Err         error
}

// Errors of the key commands (in KeyResult.Err).
var (
	// ErrKeyExists answers a CreateKey whose ID or hash is taken.
	ErrKeyExists = errors.New("key exists")
	// ErrKeyNotFound answers a RevokeKey of an unknown ID.
	ErrKeyNotFound = apikey.ErrNotFound
	// ErrFirstKeyMade answers a CreateKey marked First once any key was
	// ever made: the first key is made once per cluster.
	ErrFirstKeyMade = errors.New("the first key was made before")
)

// KeyResult answers a CreateKey, RevokeKey or SetBlocked.
type KeyResult struct {
	Key *apikey.Key
	Err error
}

// ClaimResult answers a ClaimKey: the claim in force, and whether it was
// made before (a retry, or another request with the key).
type ClaimResult struct {
	Claim
	Existing bool
}

// ClickBatchResult answers a ClickBatch.
type ClickBatchResult struct {
	// Duplicate is set when the batch (or a later one) was applied before.
	Duplicate bool
}

// Rejection answers an entry that failed to decode or validate at apply:
// it changed nothing, on every replica alike. It is an error.
type Rejection struct {
	Index uint64
	Type  Type
	Err   error
}

// Error says which entry was rejected and why.
func (r *Rejection) Error() string {
	return fmt.Sprintf("entry %d (type %d) rejected: %v", r.Index, r.Type, r.Err)
}

// Unwrap returns ErrRejected and the cause.
func (r *Rejection) Unwrap() []error { return []error{ErrRejected, r.Err} }
