// Package password hashes and checks link passwords with argon2id (RFC
// 9106), in the PHC string form ($argon2id$v=19$m=…,t=…,p=…$salt$hash).
//
// A hash costs memory and CPU by design, so a Hasher runs a bounded number
// at once: a flood of guesses or of password-setting requests queues (and
// gives up with its context) instead of taking the node's memory.
package password

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Params are argon2id's cost parameters.
type Params struct {
	// Memory in KiB, Time in passes, Threads in lanes.
	Memory  uint32
	Time    uint32
	Threads uint8
}

// DefaultParams are OWASP's first argon2id recommendation (19 MiB, 2
// passes, 1 lane): about 30 ms a hash on one core of a small server.
var DefaultParams = Params{Memory: 19 * 1024, Time: 2, Threads: 1}

// Bounds of what Verify accepts from a stored hash, and of a password.
const (
	maxMemory  = 64 * 1024
	maxTime    = 10
	maxThreads = 4
	saltLen    = 16
	keyLen     = 32
	// MaxLength bounds a password, in bytes.
	MaxLength = 128
	// MinLength is the shortest password a link may be given, in bytes
	// (NIST SP 800-63B's floor for a memorized secret): a guess may be
	// shorter, and is simply wrong.
	MinLength = 8
	// MaxHashLength bounds a PHC string Check accepts.
	MaxHashLength = 160
)

// Errors.
var (
	// ErrBadHash is returned for a string that is no argon2id PHC string
	// within the bounds above.
	ErrBadHash = errors.New("not an argon2id hash")
	// ErrBusy is returned when the context ended before a hashing slot
	// was free.
	ErrBusy = errors.New("password hashing is busy")
)

// Config configures a Hasher.
type Config struct {
	// Params are the cost of new hashes (DefaultParams when zero).
	Params Params
	// Slots is how many hashes run at once (GOMAXPROCS when 0).
	Slots int
}

// Hasher hashes and verifies passwords, a bounded number at once.
type Hasher struct {
	params Params
	slots  chan struct{}
}

// New returns a Hasher.
func New(cfg Config) *Hasher {
	if cfg.Params == (Params{}) {
		cfg.Params = DefaultParams
	}
	if cfg.Slots <= 0 {
		cfg.Slots = runtime.GOMAXPROCS(0)
	}
	return &Hasher{params: cfg.Params, slots: make(chan struct{}, cfg.Slots)}
}

func (h *Hasher) acquire(ctx context.Context) error {
	select {
	case h.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrBusy, context.Cause(ctx))
	}
}

func (h *Hasher) release() { <-h.slots }

// Hash returns the PHC string of pw with a fresh random salt.
func (h *Hasher) Hash(ctx context.Context, pw string) (string, error) {
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	if err := h.acquire(ctx); err != nil {
		return "", err
	}
	defer h.release()
	p := h.params
	key := argon2.IDKey([]byte(pw), salt, p.Time, p.Memory, p.Threads, keyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.Memory, p.Time, p.Threads,
		b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// Verify reports whether pw is the password of phc, comparing in constant
// time.
func (h *Hasher) Verify(ctx context.Context, phc, pw string) (bool, error) {
	d, err := parse(phc)
	if err != nil {
		return false, err
	}
	if err := h.acquire(ctx); err != nil {
		return false, err
	}
	defer h.release()
	key := argon2.IDKey([]byte(pw), d.salt, d.p.Time, d.p.Memory, d.p.Threads, uint32(len(d.key)))
	return subtle.ConstantTimeCompare(key, d.key) == 1, nil
}

// Check returns ErrBadHash unless phc is an argon2id PHC string Verify
// accepts: what the Raft log may hold as a link's password.
func Check(phc string) error {
	_, err := parse(phc)
	return err
}

var b64 = base64.RawStdEncoding

type decoded struct {
	p         Params
	salt, key []byte
}

func parse(phc string) (decoded, error) {
	var d decoded
	if len(phc) > MaxHashLength {
		return d, ErrBadHash
	}
	parts := strings.Split(phc, "$")
	// "", "argon2id", "v=19", "m=…,t=…,p=…", salt, key
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" || parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return d, ErrBadHash
	}
	var vals [3]uint64 // m, t, p
	kvs := strings.Split(parts[3], ",")
	if len(kvs) != len(vals) {
		return d, ErrBadHash
	}
	for i, name := range []string{"m", "t", "p"} {
		k, v, ok := strings.Cut(kvs[i], "=")
		n, err := strconv.ParseUint(v, 10, 32)
		if !ok || k != name || err != nil {
			return d, ErrBadHash
		}
		vals[i] = n
	}
	m, t, p := vals[0], vals[1], vals[2]
	if m < 8 || m > maxMemory || t < 1 || t > maxTime || p < 1 || p > maxThreads || m < 8*p {
		return d, ErrBadHash
	}
	d.p = Params{Memory: uint32(m), Time: uint32(t), Threads: uint8(p)}
	var err error
	if d.salt, err = b64.DecodeString(parts[4]); err != nil || len(d.salt) < 8 || len(d.salt) > 64 {
		return d, ErrBadHash
	}
	if d.key, err = b64.DecodeString(parts[5]); err != nil || len(d.key) < 16 || len(d.key) > 64 {
		return d, ErrBadHash
	}
	return d, nil
}
