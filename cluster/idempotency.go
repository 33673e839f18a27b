package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
)

// CreateOnce is Create for a request with an Idempotency-Key. The first
// request claims the key for the code it is about to create (an alias, or
// a fresh generated code); a retry finds the claim and creates the same
// code with the same nonce, which answers the link the first made (or
// makes it, if the first never got that far). replayed reports a retry.
func (ls *Links) CreateOnce(ctx context.Context, req link.CreateRequest, idem link.Idempotency) (l *link.Link, replayed bool, err error) {
	res, replayed, err := ls.createOnce(ctx, []link.CreateRequest{req}, idem)
	if err != nil {
		return nil, false, err
	}
	return res[0].Link, replayed, res[0].Err
}

// CreateManyOnce is CreateMany for a request with an Idempotency-Key (see
// CreateOnce): its retries answer link by link as the first did.
func (ls *Links) CreateManyOnce(ctx context.Context, reqs []link.CreateRequest, idem link.Idempotency) ([]link.CreateResult, bool, error) {
	return ls.createOnce(ctx, reqs, idem)
}

func (ls *Links) createOnce(ctx context.Context, reqs []link.CreateRequest, idem link.Idempotency) ([]link.CreateResult, bool, error) {
	n := ls.n
	if len(reqs) == 0 || len(reqs) > command.MaxClaimCodes {
		return nil, false, fmt.Errorf("%w: %d links with one Idempotency-Key", link.ErrInvalidInput, len(reqs))
	}
	if !n.clusterAt(levelIdempotency) {
		return nil, false, link.ErrUpgradeNeeded
	}
	now := time.Now().UTC()
	cmds := make([]command.CreateIfAbsent, len(reqs))
	codes := make([]string, len(reqs))
	level, need := 0, 0
	for i, req := range reqs {
		cmds[i] = newCreate(req, now)
		level = max(level, cmds[i].Level())
		if codes[i] = cmds[i].Code; codes[i] == "" {
			need++
		}
	}
	if err := n.supports(level); err != nil {
		return nil, false, err // the claim names every code: all or none
	}
	ctx, cancel := withDefaultTimeout(ctx, 30*time.Second)
	defer cancel()
	var fresh []string
	var err error
	switch {
	case need == 1:
		var c string
		c, err = ls.nextCode(ctx)
		fresh = []string{c}
	case need > 1:
		fresh, err = ls.leaseCodes(ctx, need)
	}
	if err != nil {
		return nil, false, err
	}
	generated := make([]bool, len(reqs))
	for i := range codes {
		if codes[i] == "" {
			codes[i], fresh, generated[i] = fresh[0], fresh[1:], true
		}
	}
	claim := command.ClaimKey{Key: idem.Key, Body: idem.Body, Codes: codes, Now: now, Attempt: newNonce()}
	r, err := n.router.retryUnknown(ctx, n.host.locate(idem.Key).Group(), claim.Encode())
	if err != nil {
		return nil, false, err
	}
	if r.Claim == nil {
		return nil, false, fmt.Errorf("claim answered without a claim")
	}
	if r.Claim.Body != idem.Body || len(r.Claim.Codes) != len(reqs) {
		return nil, false, link.ErrIdempotencyMismatch
	}
	// Our own claim proposed again (an unknown outcome) answers Existing
	// with our Attempt: not a replay of an earlier request.
	replayed := r.Claim.Existing && r.Claim.Attempt != claim.Attempt
	out := make([]link.CreateResult, len(reqs))
	for i := range cmds {
		cmds[i].Code = r.Claim.Codes[i]
		cmds[i].Nonce = claimNonce(idem.Key, i)
		if cmds[i].Code != codes[i] {
			// The first request's generated code is the one to make.
			generated[i] = false
		}
	}
	ls.proposeCreates(ctx, cmds, out)
	for i := range out {
		if errors.Is(out[i].Err, link.ErrAliasTaken) && (generated[i] || reqs[i].Alias == "") {
			// A generated code an alias took first: its claim names it,
			// so a retry with this key would meet the same alias.
			out[i].Err = fmt.Errorf("%w (%s)", link.ErrClaimedCodeTaken, cmds[i].Code)
		}
	}
	return out, replayed, nil
}

// claimNonce is the nonce of the i-th create of a claimed key: the same
// for every retry, never 0.
func claimNonce(key string, i int) uint64 {
	h := sha256.Sum256(binary.BigEndian.AppendUint32([]byte(key), uint32(i)))
	return binary.BigEndian.Uint64(h[:8]) | 1
}
