package httpapi

import (
	"bytes"
	"io"
	"net/http"

	"github.com/linkraft/linkraft/link"
)

// Idempotency-Key (IETF httpapi draft) on POST /api/v1/links and
// /api/v1/links/bulk: a retry with the same key and body within a day,
// through any node, answers as the first request did and makes nothing new
// (Links.CreateOnce); the same key with another body is 422. Keys are the
// caller's own: an owner's key never meets another owner's (anonymous
// callers: their client network's).

// maxIdempotencyKey bounds the header's value.
const maxIdempotencyKey = 255

// idempotencyKey returns the request's Idempotency-Key (the draft's
// quoted string, or the bare token most clients send), "" without one.
func idempotencyKey(r *http.Request) (string, bool, error) {
	vs := r.Header.Values("Idempotency-Key")
	if len(vs) == 0 {
		return "", false, nil
	}
	v := vs[0]
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	bad := len(vs) > 1 || v == "" || len(v) > maxIdempotencyKey
	for _, c := range []byte(v) {
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			bad = true
		}
	}
	if bad {
		return "", false, &requestError{status: http.StatusBadRequest, kind: "invalid-idempotency-key", title: "Bad Request",
			detail: "Idempotency-Key must be one value of 1 to 255 printable ASCII characters (a UUID, say)", field: "Idempotency-Key"}
	}
	return v, true, nil
}

// idempotent reads r's Idempotency-Key, if it has one, and makes r's body
// also copy into the returned buffer, for the fingerprint of exactly what
// was read (readJSON reads it to its end); raw is nil without a key.
func idempotent(r *http.Request) (key string, raw *bytes.Buffer, err error) {
	key, once, err := idempotencyKey(r)
	if err != nil || !once {
		return "", nil, err
	}
	raw = &bytes.Buffer{}
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(r.Body, raw), r.Body}
	return key, raw, nil
}

// idempotencyOf is the cluster's identity of key for p's request with body.
func idempotencyOf(p *principal, key string, body []byte) link.Idempotency {
	owner := "key:" + p.owner()
	if p.anon {
		owner = "anonymous:" + clientNet(p.ip)
	}
	return link.IdempotencyKey(owner, key, body)
}

// errIdempotencyPassword refuses an Idempotency-Key on a create that sets
// a password: the body's fingerprint, kept through Raft for a day, would be
// a fast hash of the password.
var errIdempotencyPassword = &requestError{status: http.StatusBadRequest, kind: "invalid-input", title: "Bad Request",
	detail: "a create with a password takes no Idempotency-Key (its fingerprint would keep a fast hash of the password); set the password with PATCH",
	field:  "Idempotency-Key"}

// errIdempotencyReused answers a key sent again with another body.
var errIdempotencyReused = &requestError{status: http.StatusUnprocessableEntity, kind: "idempotency-key-reused",
	title: "Unprocessable Content", detail: "this Idempotency-Key was used with another request body; use a new key for a new request",
	field: "Idempotency-Key"}

// markReplayed says an answer repeats an earlier request's.
func markReplayed(w http.ResponseWriter, replayed bool) {
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
}
