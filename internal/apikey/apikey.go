// Package apikey is what an API key is: its secret, the SHA-256 under which
// the cluster stores it, its scopes and its owner. Secrets are made here and
// shown once; the cluster keeps only the hash (fsm/keys.go).
package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Scope is one permission of a key.
type Scope uint32

// Scopes a key may carry.
const (
	// LinksRead lets a key read and list its owner's links.
	LinksRead Scope = 1 << iota
	// LinksWrite lets a key create, change and delete its owner's links.
	LinksWrite
	// StatsRead lets a key read its owner's links' stats and visits.
	StatsRead
	// Admin is every scope on every owner's links, key management, the
	// blocklist and the admin API.
	Admin
)

// AllScopes is every scope bit this version knows.
const AllScopes = LinksRead | LinksWrite | StatsRead | Admin

var scopeNames = []struct {
	s    Scope
	name string
}{{LinksRead, "links:read"}, {LinksWrite, "links:write"}, {StatsRead, "stats:read"}, {Admin, "admin"}}

// Has reports whether s grants want (admin grants every scope).
func (s Scope) Has(want Scope) bool { return s&Admin != 0 || s&want == want }

// Names lists the scopes of s by name, in a fixed order.
func (s Scope) Names() []string {
	out := []string{}
	for _, n := range scopeNames {
		if s&n.s != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// String joins the names with commas.
func (s Scope) String() string { return strings.Join(s.Names(), ",") }

// ErrInvalid is wrapped by every validation failure of this package.
var ErrInvalid = errors.New("apikey: invalid")

// ParseScopes reads scope names; an unknown or repeated name is an error,
// and so is an empty list.
func ParseScopes(names []string) (Scope, error) {
	var s Scope
	for _, raw := range names {
		found := false
		for _, n := range scopeNames {
			if n.name == raw {
				if s&n.s != 0 {
					return 0, fmt.Errorf("%w: scope %q given twice", ErrInvalid, raw)
				}
				s |= n.s
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("%w: unknown scope %q (want links:read, links:write, stats:read or admin)", ErrInvalid, raw)
		}
	}
	if s == 0 {
		return 0, fmt.Errorf("%w: a key needs at least one scope", ErrInvalid)
	}
	return s, nil
}

// Owner names.
const (
	// OwnerAdmin owns the links made before keys existed (their owner is
	// empty) and those the first key makes.
	OwnerAdmin = "admin"
	// OwnerAnonymous owns links made without a key (-anonymous-create).
	OwnerAnonymous = "anonymous"
	// MaxName bounds a key's name and owner.
	MaxName = 64
)

// ValidName checks a key name or owner: 1 to 64 bytes of letters, digits
// and . _ - @ : (it shows in listings and logs).
func ValidName(field, s string) error {
	if s == "" || len(s) > MaxName {
		return fmt.Errorf("%w: %s must be 1 to %d characters", ErrInvalid, field, MaxName)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._-@:", c) >= 0) {
			return fmt.Errorf("%w: %s may hold letters, digits and . _ - @ : only", ErrInvalid, field)
		}
	}
	return nil
}

// LinkOwner is the owner a stored link belongs to: links made before keys
// existed have none and belong to OwnerAdmin.
func LinkOwner(stored string) string {
	if stored == "" {
		return OwnerAdmin
	}
	return stored
}

// Hash is the SHA-256 of a secret: all the cluster stores of it.
type Hash [sha256.Size]byte

// HashOf hashes a secret.
func HashOf(secret string) Hash { return sha256.Sum256([]byte(secret)) }

// Equal compares two hashes in constant time.
func (h Hash) Equal(o Hash) bool { return subtle.ConstantTimeCompare(h[:], o[:]) == 1 }

// secretPrefix marks linkraft secrets, so that secret scanners and people
// can tell one apart.
const secretPrefix = "lrk_"

// NewSecret returns a new secret: 32 random bytes, printable.
func NewSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return secretPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// ValidSecret checks the form of a secret given by an operator (the first
// admin key from LINKNODE_ADMIN_KEY): a secret NewSecret made, or any 32 to
// 256 printable ASCII characters.
func ValidSecret(s string) error {
	if len(s) < 32 || len(s) > 256 {
		return fmt.Errorf("%w: a key must be 32 to 256 characters (linknode keygen -admin-o FILE makes a first admin key, linknode keys create any other)", ErrInvalid)
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return fmt.Errorf("%w: a key must be printable ASCII without spaces", ErrInvalid)
		}
	}
	return nil
}

// NewID returns a key ID: 8 random bytes in hex. IDs are public (listings,
// logs, revocation); they say nothing about the secret.
func NewID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// ValidID checks a key ID's form (1 to 64 hex or letter-digit characters).
func ValidID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// Key is a key as the cluster stores it: everything but the secret.
type Key struct {
	ID     string
	Name   string
	Owner  string
	Scopes Scope
	// RateLimit is the key's own limit in requests per second (0: the
	// node's -rate-limit).
	RateLimit uint32
	CreatedAt time.Time
	Hash      Hash
}

// Request describes a key to make: the node makes its ID and secret.
type Request struct {
	Name      string
	Owner     string
	Scopes    Scope
	RateLimit uint32
}

var (
	// ErrUnauthorized is returned for a secret that is no key of the
	// cluster (unknown, or revoked).
	ErrUnauthorized = errors.New("unauthorized")
	// ErrNotFound is returned for a key ID the cluster does not know.
	ErrNotFound = errors.New("no such key")
)

// Sort orders keys by creation time, then ID.
func Sort(keys []Key) {
	sort.Slice(keys, func(i, j int) bool {
		if !keys[i].CreatedAt.Equal(keys[j].CreatedAt) {
			return keys[i].CreatedAt.Before(keys[j].CreatedAt)
		}
		return keys[i].ID < keys[j].ID
	})
}

// FromHeader returns the secret of an "Authorization: Bearer <secret>"
// header value, or false.
func FromHeader(v string) (string, bool) {
	const p = "Bearer "
	if len(v) <= len(p) || !strings.EqualFold(v[:len(p)], p) {
		return "", false
	}
	s := strings.TrimSpace(v[len(p):])
	return s, s != ""
}
