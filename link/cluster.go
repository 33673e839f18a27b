package link

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// What the cluster answers besides links: the outcome of each create of a
// bulk create, the identity of an Idempotency-Key, and how complete an
// answer gathered from every node is.

// CreateResult is the outcome of one create of a bulk create: the link, or
// the error a single create of the same request would have returned.
type CreateResult struct {
	Link *Link
	Err  error
}

// Idempotency identifies a create sent with an Idempotency-Key (IETF
// httpapi draft): its retries within a day, through any node, make nothing
// new and answer with the links the first made.
type Idempotency struct {
	// Key is the key's identity: the hex SHA-256 of the owner and the
	// header's value (IdempotencyKey), so that two owners' keys never
	// meet.
	Key string
	// Body is the hex SHA-256 of the request's body: a key sent again with
	// another body is refused (ErrIdempotencyMismatch).
	Body string
}

// IdempotencyKey returns the Idempotency of a request of owner with the
// header value key and the body.
func IdempotencyKey(owner, key string, body []byte) Idempotency {
	k := sha256.Sum256([]byte(owner + "\x00" + key))
	b := sha256.Sum256(body)
	return Idempotency{Key: hex.EncodeToString(k[:]), Body: hex.EncodeToString(b[:])}
}

var (
	// ErrClaimedCodeTaken is returned for a create whose key claimed a
	// generated code that an alias took first: a retry with the key would
	// meet the same alias, so the request needs a new key.
	ErrClaimedCodeTaken = errors.New("the code this Idempotency-Key claimed was taken by an alias; send the request with a new key")
	// ErrIdempotencyMismatch is returned for an Idempotency-Key used
	// before with another body (or another number of links).
	ErrIdempotencyMismatch = errors.New("the Idempotency-Key was used with another request")
	// ErrUpgradeNeeded is returned for what some node of the cluster runs
	// a version too old to apply (or to keep): upgrade every node first.
	ErrUpgradeNeeded = fmt.Errorf("%w: a node of the cluster runs an older version; upgrade every node first", ErrUnavailable)
)

// Gathered says which nodes a cluster-wide answer is missing.
type Gathered struct {
	// Partial is set when some member did not answer in time.
	Partial bool `json:"partial"`
	// Missing lists those members.
	Missing []string `json:"missing_nodes,omitempty"`
}
