package fsm

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/linkraft/linkraft/link"
)

// Every command type is registered here with the group it belongs to and
// its decoder, which also validates: Consul's registerCommand table, as one
// immutable map. The leader runs the same decoder before it proposes
// (Check), and every replica runs it at apply: a committed entry that fails
// it is rejected the same way on every replica, with no state changed; an
// entry of a type missing here (written by a newer version) halts the group
// on this node until an upgrade, rather than being guessed at.
//
// Apply-time validation must give the same answer for an entry forever, on
// every version that replays it: the checks below are deliberately loose
// and self-contained (never the HTTP layer's policy, which may tighten),
// and a check once added to a type is never made stricter for it.

// GroupKind says which state machine a command type belongs to.
type GroupKind uint8

// Group kinds.
const (
	// GroupShard is a link shard.
	GroupShard GroupKind = 1
	// GroupMeta is the meta group.
	GroupMeta GroupKind = 2
)

// ErrRejected is wrapped by the response to an entry that fails to decode
// or validate. It wraps link.ErrInvalidInput: the caller sent a bad
// command.
var ErrRejected = fmt.Errorf("%w: command rejected", link.ErrInvalidInput)

// ErrUnknownType is wrapped by Check's error for a type this version does
// not know.
var ErrUnknownType = errors.New("fsm: unknown command type")

// Rejection is the apply response of a rejected entry; it is an error.
type Rejection struct {
	Index uint64
	Type  CommandType
	Err   error
}

func (r *Rejection) Error() string {
	return fmt.Sprintf("fsm: entry %d (type %d) rejected: %v", r.Index, r.Type, r.Err)
}

// Unwrap returns ErrRejected and the cause.
func (r *Rejection) Unwrap() []error { return []error{ErrRejected, r.Err} }

type commandSpec struct {
	name  string
	group GroupKind
	// decode decodes and validates the body (the entry after its type
	// byte); the value goes to the FSM's apply.
	decode func(body []byte) (any, error)
}

var commands = map[CommandType]commandSpec{
	TypeCreateIfAbsent: {"create", GroupShard, func(b []byte) (any, error) { return decodeValid(b, decodeCreate, (*CreateIfAbsent).validate) }},
	TypeUpdate:         {"update", GroupShard, func(b []byte) (any, error) { return decodeValid(b, decodeUpdate, (*Update).validate) }},
	TypeDelete:         {"delete", GroupShard, func(b []byte) (any, error) { return decodeValid(b, decodeDelete, (*Delete).validate) }},
	TypeConsumeVisit:   {"consume-visit", GroupShard, func(b []byte) (any, error) { return decodeValid(b, decodeConsumeVisit, (*ConsumeVisit).validate) }},
	TypeCreateBatch:    {"create-batch", GroupShard, func(b []byte) (any, error) { return decodeValid(b, decodeCreateBatch, (*CreateBatch).validate) }},
	TypeClickBatch:     {"click-batch", GroupShard, decodeClickBatchBody},
	TypeSetSettings:    {"set-settings", GroupMeta, func(b []byte) (any, error) { return decodeValid(b, decodeSettings, (*Settings).validate) }},
	TypeLeaseRange:     {"lease-range", GroupMeta, func(b []byte) (any, error) { return decodeValid(b, decodeLease, (*LeaseRange).validate) }},
	TypeSetPlacement:   {"set-placement", GroupMeta, func(b []byte) (any, error) { return decodeValid(b, decodePlacement, (*Placement).validate) }},
	TypeRegisterNode:   {"register-node", GroupMeta, func(b []byte) (any, error) { return decodeValid(b, decodeRegisterNode, (*RegisterNode).validate) }},
	TypeCreateKey:      {"create-key", GroupMeta, func(b []byte) (any, error) { return decodeValid(b, decodeCreateKey, (*CreateKey).validate) }},
	TypeRevokeKey:      {"revoke-key", GroupMeta, func(b []byte) (any, error) { return decodeValid(b, decodeRevokeKey, (*RevokeKey).validate) }},
	TypeSetBlocked:     {"set-blocked", GroupMeta, func(b []byte) (any, error) { return decodeValid(b, decodeSetBlocked, (*SetBlocked).validate) }},
}

func decodeValid[T any](body []byte, decode func([]byte) (*T, error), validate func(*T) error) (any, error) {
	v, err := decode(body)
	if err != nil {
		return nil, err
	}
	if err := validate(v); err != nil {
		return nil, err
	}
	return v, nil
}

// clickBatchBody is a click batch that passed validation; the shard FSM
// applies it streaming from the bytes.
type clickBatchBody []byte

func decodeClickBatchBody(body []byte) (any, error) {
	if err := checkClickBatch(body); err != nil {
		return nil, err
	}
	return clickBatchBody(body), nil
}

// CommandName returns the registered name of typ, or "unknown".
func CommandName(typ CommandType) string {
	if c, ok := commands[typ]; ok {
		return c.name
	}
	return "unknown"
}

// Check decodes and validates a whole entry (type byte and body) for a
// group of kind g, as apply will: the leader calls it before proposing.
func Check(g GroupKind, entry []byte) error {
	if len(entry) == 0 {
		return fmt.Errorf("%w: empty command", ErrRejected)
	}
	typ := CommandType(entry[0])
	c, ok := commands[typ]
	if !ok {
		return fmt.Errorf("%w %d", ErrUnknownType, typ)
	}
	if c.group != g {
		return fmt.Errorf("%w: a %s command does not belong to this group", ErrRejected, c.name)
	}
	if _, err := c.decode(entry[1:]); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrRejected, c.name, err)
	}
	return nil
}

// Apply-time bounds (see the top of this file: never tightened).
const (
	maxStoredURL   = 1 << 20
	maxStoredTags  = 256
	maxStoredTag   = 1024
	maxStoredOwner = 1024
	maxNodeID      = 256
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrDecode}, args...)...)
}

func checkCode(code string) error {
	if !link.ValidCode(code) {
		return invalid("code %q is not a valid code", truncate(code))
	}
	return nil
}

// checkURL is the apply-time URL rule: an absolute http or https URL of at
// most 1 MiB, valid UTF-8, with no spaces or control characters.
func checkURL(u string) error {
	if u == "" || len(u) > maxStoredURL || !utf8.ValidString(u) {
		return invalid("url is empty, over 1 MiB or not UTF-8")
	}
	for _, r := range u {
		if r <= ' ' || r == 0x7f {
			return invalid("url contains a space or control character")
		}
	}
	p, err := url.Parse(u)
	if err != nil {
		return invalid("url cannot be parsed")
	}
	if s := strings.ToLower(p.Scheme); (s != "http" && s != "https") || p.Host == "" {
		return invalid("url is not an absolute http(s) URL")
	}
	return nil
}

func checkRedirect(r int) error {
	if r != 0 && !link.ValidRedirect(r) {
		return invalid("redirect %d", r)
	}
	return nil
}

func checkTags(tags []string) error {
	if len(tags) > maxStoredTags {
		return invalid("%d tags", len(tags))
	}
	for _, t := range tags {
		if len(t) > maxStoredTag {
			return invalid("a tag of %d bytes", len(t))
		}
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

func (c *CreateIfAbsent) validate() error {
	if err := checkCode(c.Code); err != nil {
		return err
	}
	if err := checkURL(c.URL); err != nil {
		return err
	}
	if len(c.Owner) > maxStoredOwner {
		return invalid("owner of %d bytes", len(c.Owner))
	}
	if err := checkRedirect(c.Redirect); err != nil {
		return err
	}
	return checkTags(c.Tags)
}

func (u *Update) validate() error {
	if err := checkCode(u.Code); err != nil {
		return err
	}
	if u.Set&SetURL != 0 {
		if err := checkURL(u.URL); err != nil {
			return err
		}
	}
	if u.Set&SetRedirect != 0 {
		if err := checkRedirect(u.Redirect); err != nil {
			return err
		}
	}
	return checkTags(u.Tags)
}

func (d *Delete) validate() error { return checkCode(d.Code) }

func (c *ConsumeVisit) validate() error { return checkCode(c.Code) }

func (c *CreateBatch) validate() error {
	for i := range c.Creates {
		if err := c.Creates[i].validate(); err != nil {
			return fmt.Errorf("create %d: %w", i, err)
		}
	}
	return nil
}

func (s *Settings) validate() error {
	if s.Shards < 1 || s.Shards > 4096 {
		return invalid("%d shards", s.Shards)
	}
	if s.ReplicationFactor < 1 || s.ReplicationFactor > 16 {
		return invalid("replication factor %d", s.ReplicationFactor)
	}
	if s.ClusterID == "" || len(s.ClusterID) > maxNodeID {
		return invalid("cluster id %q", truncate(s.ClusterID))
	}
	return nil
}

func (l *LeaseRange) validate() error {
	if l.Node == "" || len(l.Node) > maxNodeID {
		return invalid("lease for node %q", truncate(l.Node))
	}
	return nil
}

func (p *Placement) validate() error {
	if len(p.Shards) == 0 || len(p.Shards) > 4096 {
		return invalid("placement of %d shards", len(p.Shards))
	}
	for i, nodes := range p.Shards {
		// Empty is allowed: removing the only replica of a shard leaves it
		// on no node.
		if len(nodes) > 16 {
			return invalid("shard %d placed on %d nodes", i, len(nodes))
		}
		for j, id := range nodes {
			if id == "" || len(id) > maxNodeID {
				return invalid("shard %d: node id %q", i, truncate(id))
			}
			for _, other := range nodes[:j] {
				if other == id {
					return invalid("shard %d placed twice on %s", i, id)
				}
			}
		}
	}
	return nil
}
