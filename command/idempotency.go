package command

import (
	"time"

	"github.com/linkraft/linkraft/internal/wire"
)

// Idempotency-Key claims (issue 16, item 10). A create or bulk create sent
// with an Idempotency-Key first claims the key on the shard its identity
// hashes to, naming the codes it is about to create; a retry of the same
// request finds the claim and creates (or finds) the same codes with the
// same nonces, so that it answers as the first did, whichever node it
// reaches. A claim is kept for ClaimTTL.

// ClaimTTL is how long a claim holds after it is made.
const ClaimTTL = 24 * time.Hour

// MaxClaimCodes bounds the codes of one claim (a bulk create's links).
const MaxClaimCodes = MaxCreateBatch

// ClaimKey claims Key for the request whose body hashes to Body, naming
// the codes it creates, unless an unexpired claim of Key exists (then that
// claim is the answer).
type ClaimKey struct {
	// Key is the key's identity: the hex SHA-256 of the owner and the
	// header's value (64 characters).
	Key string
	// Body is the hex SHA-256 of the request's body.
	Body string
	// Codes are the codes the request creates, in its order.
	Codes []string
	Now   time.Time
	// Attempt is random per request (not per proposal): a claim that
	// finds its own Attempt is its own entry proposed again, not a retry
	// of the request.
	Attempt uint64
}

// Claim is a stored claim (under its key's identity) and what a ClaimKey
// answers.
type Claim struct {
	Body    string
	Codes   []string
	Expires time.Time
	Attempt uint64
}

const (
	fClaimKey     = 1
	fClaimBody    = 2
	fClaimCode    = 3
	fClaimNow     = 4
	fClaimExpires = 5
	fClaimAttempt = 6
)

var claimKeyCodec = wire.NewCodec(nil,
	wire.String(fClaimKey, func(c *ClaimKey) *string { return &c.Key }),
	wire.String(fClaimBody, func(c *ClaimKey) *string { return &c.Body }),
	wire.Strings(fClaimCode, func(c *ClaimKey) *[]string { return &c.Codes }),
	wire.Time(fClaimNow, func(c *ClaimKey) *time.Time { return &c.Now }),
	wire.Uint(fClaimAttempt, func(c *ClaimKey) *uint64 { return &c.Attempt }),
)

var claimCodec = wire.NewCodec(nil,
	wire.String(fClaimBody, func(c *Claim) *string { return &c.Body }),
	wire.Strings(fClaimCode, func(c *Claim) *[]string { return &c.Codes }),
	wire.Time(fClaimExpires, func(c *Claim) *time.Time { return &c.Expires }),
	wire.Uint(fClaimAttempt, func(c *Claim) *uint64 { return &c.Attempt }),
)

// Encode returns the Raft entry for c.
func (c *ClaimKey) Encode() []byte {
	return claimKeyCodec.Append(append(make([]byte, 0, 160+12*len(c.Codes)), byte(TypeClaimKey)), c)
}

// AppendTo appends c's record form to b.
func (c *Claim) AppendTo(b []byte) []byte { return claimCodec.Append(b, c) }

// Unmarshal parses a record AppendTo wrote.
func (c *Claim) Unmarshal(b []byte) error { return claimCodec.DecodeInto(b, c) }

func (c *ClaimKey) validate() error {
	if !isHex64(c.Key) || !isHex64(c.Body) {
		return invalid("claim key and body must be 64 hex digits")
	}
	if len(c.Codes) == 0 || len(c.Codes) > MaxClaimCodes {
		return invalid("claim of %d codes", len(c.Codes))
	}
	for _, code := range c.Codes {
		if err := checkCode(code); err != nil {
			return err
		}
	}
	if c.Now.IsZero() {
		return invalid("claim without a time")
	}
	return nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
