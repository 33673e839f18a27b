package command

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/linkraft/linkraft/internal/password"
	"github.com/linkraft/linkraft/internal/wire"
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
var ErrUnknownType = errors.New("unknown command type")

// Spec is a registered command type.
type Spec struct {
	// Name names the type in logs and errors.
	Name string
	// Group is the kind of group whose log holds the type.
	Group GroupKind
	// decode reads the body (the entry after its type byte) into the
	// command's struct.
	decode func(body []byte) (any, error)
	// validate checks a decoded command (see the top of this file).
	validate func(v any) error
	// parse, if set, replaces decode and validate for what apply gets.
	parse func(body []byte) (any, error)
}

// spec registers a command type whose struct is T.
func spec[T any](name string, g GroupKind, decode func([]byte) (*T, error), validate func(*T) error) Spec {
	return Spec{Name: name, Group: g,
		decode:   func(b []byte) (any, error) { return decode(b) },
		validate: func(v any) error { return validate(v.(*T)) },
	}
}

var commands = map[Type]Spec{
	TypeCreateIfAbsent: spec("create", GroupShard, createCodec.Decode, (*CreateIfAbsent).validate),
	TypeUpdate:         spec("update", GroupShard, updateCodec.Decode, (*Update).validate),
	TypeDelete:         spec("delete", GroupShard, deleteCodec.Decode, (*Delete).validate),
	TypeConsumeVisit:   spec("consume-visit", GroupShard, consumeVisitCodec.Decode, (*ConsumeVisit).validate),
	TypeCreateBatch:    spec("create-batch", GroupShard, createBatchCodec.Decode, (*CreateBatch).validate),
	TypeClaimKey:       spec("claim-key", GroupShard, claimKeyCodec.Decode, (*ClaimKey).validate),
	TypeRestoreLinks:   spec("restore-links", GroupShard, restoreCodec.Decode, (*RestoreLinks).validate),
	TypeClickBatch: {Name: "click-batch", Group: GroupShard,
		decode: func(b []byte) (any, error) { return clickBatchCodec.Decode(b) },
		parse:  parseClickBatch,
	},
	TypeSetSettings:  spec("set-settings", GroupMeta, wrapped(settingsCodec, func(s *SetSettings) *Settings { return &s.Settings }), func(s *SetSettings) error { return s.Settings.validate() }),
	TypeLeaseRange:   spec("lease-range", GroupMeta, leaseCodec.Decode, (*LeaseRange).validate),
	TypeSetPlacement: spec("set-placement", GroupMeta, wrapped(placementCodec, func(s *SetPlacement) *Placement { return &s.Placement }), func(s *SetPlacement) error { return s.Placement.validate() }),
	TypeRegisterNode: spec("register-node", GroupMeta, registerNodeCodec.Decode, (*RegisterNode).validate),
	TypeCreateKey:    spec("create-key", GroupMeta, createKeyCodec.Decode, (*CreateKey).validate),
	TypeRevokeKey:    spec("revoke-key", GroupMeta, revokeKeyCodec.Decode, (*RevokeKey).validate),
	TypeSetBlocked:   spec("set-blocked", GroupMeta, setBlockedCodec.Decode, (*SetBlocked).validate),
	TypeAdmitNode:    spec("admit-node", GroupMeta, wrapped(registerNodeCodec, func(a *AdmitNode) *RegisterNode { return &a.Member }), (*AdmitNode).validate),
}

// wrapped decodes a command that is one message (a SetSettings is its
// Settings).
func wrapped[W, M any](c *wire.Codec[M], inner func(*W) *M) func([]byte) (*W, error) {
	return func(body []byte) (*W, error) {
		w := new(W)
		if err := c.DecodeInto(body, inner(w)); err != nil {
			return nil, err
		}
		return w, nil
	}
}

// Lookup returns the registered spec of typ.
func Lookup(typ Type) (Spec, bool) {
	s, ok := commands[typ]
	return s, ok
}

// Parse decodes and validates body (the entry after its type byte) into
// what the group's apply takes: the command's struct (*CreateIfAbsent,
// *SetSettings, ...), or a ClickBatchBody for a click batch.
func (s Spec) Parse(body []byte) (any, error) {
	if s.parse != nil {
		return s.parse(body)
	}
	v, err := s.decode(body)
	if err != nil {
		return nil, err
	}
	if err := s.validate(v); err != nil {
		return nil, err
	}
	return v, nil
}

// Decode reads a whole entry (type byte and body) into its command struct
// (*CreateIfAbsent, *ClickBatch, *SetSettings, ...) without validating it.
func Decode(entry []byte) (any, error) {
	if len(entry) == 0 {
		return nil, fmt.Errorf("%w: empty entry", wire.ErrDecode)
	}
	s, ok := commands[Type(entry[0])]
	if !ok {
		return nil, fmt.Errorf("%w: unknown command type %d", wire.ErrDecode, entry[0])
	}
	v, err := s.decode(entry[1:])
	if u, ok := v.(*Update); ok && err == nil {
		u.settle()
	}
	return v, err
}

// Name returns the registered name of typ, or "unknown".
func Name(typ Type) string {
	if c, ok := commands[typ]; ok {
		return c.Name
	}
	return "unknown"
}

// Check decodes and validates a whole entry (type byte and body) for a
// group of kind g, as apply will: the leader calls it before proposing.
func Check(g GroupKind, entry []byte) error {
	if len(entry) == 0 {
		return fmt.Errorf("%w: empty command", ErrRejected)
	}
	typ := Type(entry[0])
	c, ok := commands[typ]
	if !ok {
		return fmt.Errorf("%w %d", ErrUnknownType, typ)
	}
	if c.Group != g {
		return fmt.Errorf("%w: a %s command does not belong to this group", ErrRejected, c.Name)
	}
	if _, err := c.Parse(entry[1:]); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrRejected, c.Name, err)
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
	maxStoredText  = 16 << 10
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{wire.ErrDecode}, args...)...)
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
	if err := checkURL(c.Request.URL); err != nil {
		return err
	}
	return checkFields(&c.Request)
}

// checkFields is the apply-time check of a link's fields but its code and
// URL.
func checkFields(r *link.CreateRequest) error {
	if len(r.Owner) > maxStoredOwner {
		return invalid("owner of %d bytes", len(r.Owner))
	}
	if strings.ContainsFunc(r.Owner, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		// The listing indexes' keys are owner 0x00 …: a control byte
		// (NUL above all) would make one owner's prefix match another's.
		return invalid("owner with a control character")
	}
	if err := checkRedirect(r.Redirect); err != nil {
		return err
	}
	if err := checkText(r.Title, r.Description, r.Note); err != nil {
		return err
	}
	if err := checkPassword(r.PasswordHash); err != nil {
		return err
	}
	if err := checkRules(r.Rules); err != nil {
		return err
	}
	return checkTags(r.Tags)
}

// checkText is the apply-time bound of a link's texts (its title,
// description and note).
func checkText(texts ...string) error {
	for _, t := range texts {
		if len(t) > maxStoredText || !utf8.ValidString(t) {
			return invalid("title, description or note over 16 KiB or not UTF-8")
		}
	}
	return nil
}

// checkPassword is the apply-time check of a link's password hash: empty,
// or an argon2id hash whose cost is bounded (a hostile cost would be paid
// by every guess).
func checkPassword(hash string) error {
	if hash != "" && password.Check(hash) != nil {
		return invalid("password is not a bounded argon2id hash")
	}
	return nil
}

// checkRules is the apply-time check of a link's rules: what the redirect
// may send (each URL as a link's), at most link.MaxRules, small conditions.
func checkRules(rules []link.Rule) error {
	if len(rules) > link.MaxRules {
		return invalid("%d rules", len(rules))
	}
	for i, r := range rules {
		if len(r.Device) > 16 || len(r.Country) > 2 || len(r.Language) > 16 {
			return invalid("rule %d: a condition too long", i)
		}
		if err := checkURL(r.URL); err != nil {
			return fmt.Errorf("rule %d: %w", i, err)
		}
	}
	return nil
}

// validate checks a decoded update as every version before Patch did, and
// then settles its patch to the mask: the URL and the redirect are checked
// when their bit is set, the other values whatever their bit says (so
// every replica, of any version, rejects the same entries).
func (u *Update) validate() error {
	if err := checkCode(u.Code); err != nil {
		return err
	}
	p := &u.Patch
	if u.mask&SetURL != 0 {
		if err := checkURL(deref(p.URL)); err != nil {
			return err
		}
	}
	if u.mask&SetRedirect != 0 {
		if err := checkRedirect(deref(p.Redirect)); err != nil {
			return err
		}
	}
	if err := checkText(deref(p.Title), deref(p.Description), deref(p.Note)); err != nil {
		return err
	}
	if err := checkPassword(deref(p.PasswordHash)); err != nil {
		return err
	}
	if err := checkRules(deref(p.Rules)); err != nil {
		return err
	}
	if err := checkTags(deref(p.Tags)); err != nil {
		return err
	}
	u.settle()
	return nil
}

// deref is *p, or the zero value for nil.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
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
