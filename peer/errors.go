package peer

import (
	"errors"
	"fmt"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
)

var (
	// ErrUnreachable is wrapped by a call's error when the peer was never
	// reached (no connection, or no hello): nothing was sent, so another
	// peer may be asked.
	ErrUnreachable = fmt.Errorf("%w: peer not reachable", link.ErrUnavailable)
	// ErrUnsupported is a peer's answer to an operation its version does
	// not know: nothing was done, and the caller treats the peer as older.
	ErrUnsupported = fmt.Errorf("%w: the peer's version does not know the operation", link.ErrUnavailable)
)

// NotDone reports whether err says the request certainly did nothing (the
// peer was never reached, or does not know the operation), so that the
// same request may go to another peer.
func NotDone(err error) bool {
	return errors.Is(err, ErrUnreachable) || errors.Is(err, ErrUnsupported)
}

// errorCodes are the errors a response carries, in the order they are
// matched (a more specific error before the one it wraps); their codes and
// names are part of the protocol.
var errorCodes = []struct {
	code uint32
	name string
	err  error
}{
	{1, "not-found", link.ErrNotFound},
	{2, "deleted", link.ErrDeleted},
	{3, "gone", link.ErrGone},
	{4, "alias-taken", link.ErrAliasTaken},
	{5, "not-leader", link.ErrNotLeader},
	{6, "unsupported", ErrUnsupported},
	{7, "unavailable", link.ErrUnavailable},
	{8, "stale-placement", command.ErrStalePlacement},
	{9, "invalid-input", link.ErrInvalidInput},
	{10, "insufficient-storage", link.ErrInsufficientStorage},
	{11, "key-not-found", command.ErrKeyNotFound},
	{12, "key-exists", command.ErrKeyExists},
	{13, "first-key-made", command.ErrFirstKeyMade},
	{14, "exhausted", link.ErrExhausted},
}

// codeInternal is the code of any other error.
const codeInternal = 255

// errorCode returns the code and detail a response carries for err (0 for
// none).
func errorCode(err error) (uint32, string) {
	if err == nil {
		return 0, ""
	}
	for _, e := range errorCodes {
		if errors.Is(err, e.err) {
			return e.code, err.Error()
		}
	}
	return codeInternal, err.Error()
}

// errorOf is the error of a response's code and detail: the sentinel
// itself when the detail adds nothing, else the sentinel wrapped with it.
func errorOf(code uint32, detail string) error {
	if code == 0 {
		return nil
	}
	for _, e := range errorCodes {
		if e.code == code {
			if detail == "" || detail == e.err.Error() {
				return e.err
			}
			return fmt.Errorf("%w (remote: %s)", e.err, detail)
		}
	}
	return fmt.Errorf("remote error: %s", detail)
}
