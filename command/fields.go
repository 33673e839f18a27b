package command

import (
	"slices"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/linkraft/linkraft/internal/wire"
	"github.com/linkraft/linkraft/link"
)

// A link's settable fields, each one entry of linkFields: its field number
// (shared by the link record, the create and the update command), its bit
// in an update's mask, the feature level that knows it, and where it lives
// in a link.Link, a link.CreateRequest and a link.Patch. The three
// messages' codecs are made from this table, so a new field is an entry
// here beside its place in the domain types (CONTRIBUTING.md).

// Feature levels of link fields: a node gossips the highest it knows, and
// a field is written only once every node knows it (cluster.supports).
const (
	// LevelLinkMeta knows DropQuery, Title and Description.
	LevelLinkMeta = 3
	// LevelLinkAccess knows PasswordHash and Rules. A replica below it
	// would store such a link without them and serve it openly, so they
	// wait for every registered node, not only the live ones.
	LevelLinkAccess = 4
	// LevelLinkNote knows Note.
	LevelLinkNote = 6
)

// linkField is one settable field of a link.
type linkField struct {
	num protowire.Number
	// bit is the field's bit in an Update's mask; 0: no update sets it.
	bit UpdateMask
	// since is the feature level that knows the field (0: every one).
	since int
	// record is the field in a link's record and wire forms.
	record wire.Field[link.Link]
	// create is the field in a CreateIfAbsent (nil: no create sets it).
	create *wire.Field[CreateIfAbsent]
	// update is the field in an Update (nil: no update sets it); present
	// sets (to the zero value, if the entry held none) or clears a
	// decoded patch's pointer as the mask says, and set reports it.
	update  *wire.Field[Update]
	present func(p *link.Patch, on bool)
	set     func(p *link.Patch) bool
}

// field makes the entry of a field of type T, written as kind writes it
// (wire.String[string], wire.Time[time.Time], ...).
func field[T any](num protowire.Number, bit UpdateMask, since int, kind func(protowire.Number, func(*T) *T) wire.Field[T],
	inLink func(*link.Link) *T, inCreate func(*link.CreateRequest) *T, inPatch func(*link.Patch) **T) linkField {
	v := wire.Value(kind, num)
	f := linkField{num: num, bit: bit, since: since, record: wire.At(v, inLink)}
	if inCreate != nil {
		c := wire.At(v, func(c *CreateIfAbsent) *T { return inCreate(&c.Request) })
		f.create = &c
	}
	if inPatch != nil {
		u := wire.Optional(v, func(u *Update) **T { return inPatch(&u.Patch) })
		f.update = &u
		f.present = func(p *link.Patch, on bool) {
			switch ptr := inPatch(p); {
			case !on:
				*ptr = nil
			case *ptr == nil:
				*ptr = new(T)
			}
		}
		f.set = func(p *link.Patch) bool { return *inPatch(p) != nil }
	}
	return f
}

// rules is the kind of a link's rules.
func rules(num protowire.Number, p func(*[]link.Rule) *[]link.Rule) wire.Field[[]link.Rule] {
	return wire.Messages(num, ruleCodec, p)
}

var linkFields = []linkField{
	field(fURL, SetURL, 0, wire.String[string],
		func(l *link.Link) *string { return &l.URL }, func(r *link.CreateRequest) *string { return &r.URL }, func(p *link.Patch) **string { return &p.URL }),
	field(fOwner, 0, 0, wire.String[string],
		func(l *link.Link) *string { return &l.Owner }, func(r *link.CreateRequest) *string { return &r.Owner }, nil),
	field(fExpires, SetExpiresAt, 0, wire.Time[time.Time],
		func(l *link.Link) *time.Time { return &l.ExpiresAt }, func(r *link.CreateRequest) *time.Time { return &r.ExpiresAt }, func(p *link.Patch) **time.Time { return &p.ExpiresAt }),
	field(fRedirect, SetRedirect, 0, wire.Int[int],
		func(l *link.Link) *int { return &l.Redirect }, func(r *link.CreateRequest) *int { return &r.Redirect }, func(p *link.Patch) **int { return &p.Redirect }),
	field(fDisabled, SetDisabled, 0, wire.Bool[bool],
		func(l *link.Link) *bool { return &l.Disabled }, nil, func(p *link.Patch) **bool { return &p.Disabled }),
	field(fMaxVisits, 0, 0, wire.Uint[uint64, uint64],
		func(l *link.Link) *uint64 { return &l.MaxVisits }, func(r *link.CreateRequest) *uint64 { return &r.MaxVisits }, nil),
	field(fTag, SetTags, 0, wire.Strings[[]string],
		func(l *link.Link) *[]string { return &l.Tags }, func(r *link.CreateRequest) *[]string { return &r.Tags }, func(p *link.Patch) **[]string { return &p.Tags }),
	field(fDropQuery, SetDropQuery, LevelLinkMeta, wire.Bool[bool],
		func(l *link.Link) *bool { return &l.DropQuery }, func(r *link.CreateRequest) *bool { return &r.DropQuery }, func(p *link.Patch) **bool { return &p.DropQuery }),
	field(fTitle, SetTitle, LevelLinkMeta, wire.String[string],
		func(l *link.Link) *string { return &l.Title }, func(r *link.CreateRequest) *string { return &r.Title }, func(p *link.Patch) **string { return &p.Title }),
	field(fDesc, SetDescription, LevelLinkMeta, wire.String[string],
		func(l *link.Link) *string { return &l.Description }, func(r *link.CreateRequest) *string { return &r.Description }, func(p *link.Patch) **string { return &p.Description }),
	field(fNote, SetNote, LevelLinkNote, wire.String[string],
		func(l *link.Link) *string { return &l.Note }, func(r *link.CreateRequest) *string { return &r.Note }, func(p *link.Patch) **string { return &p.Note }),
	field(fPassword, SetPassword, LevelLinkAccess, wire.String[string],
		func(l *link.Link) *string { return &l.PasswordHash }, func(r *link.CreateRequest) *string { return &r.PasswordHash }, func(p *link.Patch) **string { return &p.PasswordHash }),
	field(fRules, SetRules, LevelLinkAccess, rules,
		func(l *link.Link) *[]link.Rule { return &l.Rules }, func(r *link.CreateRequest) *[]link.Rule { return &r.Rules }, func(p *link.Patch) **[]link.Rule { return &p.Rules }),
}

// byNum sorts fields by field number: every codec writes its fields in
// that order (the golden encodings pin it), whichever table they come
// from.
func byNum[M any](fs []wire.Field[M]) []wire.Field[M] {
	slices.SortStableFunc(fs, func(a, b wire.Field[M]) int { return int(a.Num) - int(b.Num) })
	return fs
}

// recordFields are a link's fields in writing order; the stored form leaves
// some out (EncodeRecord).
func recordFields(stored bool) []wire.Field[link.Link] {
	always := func(*link.Link) bool { return true }
	code, updated, redirect := always, always, always
	if stored {
		code = func(*link.Link) bool { return false }
		updated = func(l *link.Link) bool { return !l.UpdatedAt.Equal(l.CreatedAt) }
		redirect = func(l *link.Link) bool { return l.Redirect != link.DefaultRedirect }
	}
	fs := []wire.Field[link.Link]{
		wire.Only(wire.String(fCode, func(l *link.Link) *string { return &l.Code }), code),
		wire.Time(fCreated, func(l *link.Link) *time.Time { return &l.CreatedAt }),
		wire.Only(wire.Time(fUpdated, func(l *link.Link) *time.Time { return &l.UpdatedAt }), updated),
		wire.Bool(fDeleted, func(l *link.Link) *bool { return &l.Deleted }),
		wire.Uint(fNonce, func(l *link.Link) *uint64 { return &l.Nonce }),
		wire.Uint(fVersion, func(l *link.Link) *uint64 { return &l.Version }),
		wire.Uint(fVisits, func(l *link.Link) *uint64 { return &l.Visits }),
	}
	for _, f := range linkFields {
		if f.num == fRedirect {
			f.record = wire.Only(f.record, redirect)
		}
		fs = append(fs, f.record)
	}
	return byNum(fs)
}

func createFields() []wire.Field[CreateIfAbsent] {
	fs := []wire.Field[CreateIfAbsent]{
		wire.String(fCode, func(c *CreateIfAbsent) *string { return &c.Code }),
		wire.Time(fCreated, func(c *CreateIfAbsent) *time.Time { return &c.Now }),
		wire.Uint(fNonce, func(c *CreateIfAbsent) *uint64 { return &c.Nonce }),
	}
	for _, f := range linkFields {
		if f.create != nil {
			fs = append(fs, *f.create)
		}
	}
	return byNum(fs)
}

// updateFields are the code, the time and the mask, then the patch's
// fields.
func updateFields() []wire.Field[Update] {
	var fs []wire.Field[Update]
	for _, f := range linkFields {
		if f.update != nil {
			fs = append(fs, *f.update)
		}
	}
	return append([]wire.Field[Update]{
		wire.String(fCode, func(u *Update) *string { return &u.Code }),
		wire.Time(fCreated, func(u *Update) *time.Time { return &u.Now }),
		{Num: fMask,
			Put: func(b []byte, num protowire.Number, u *Update) []byte {
				return wire.AppendUint(b, num, uint64(maskOf(&u.Patch)))
			},
			Get: func(r wire.Reader, typ protowire.Type, num protowire.Number, u *Update) wire.Reader {
				u.mask = UpdateMask(r.Uint(typ, num))
				return r
			},
		},
	}, byNum(fs)...)
}

// maskOf is the mask of the fields p sets.
func maskOf(p *link.Patch) UpdateMask {
	var m UpdateMask
	for _, f := range linkFields {
		if f.set != nil && f.set(p) {
			m |= f.bit
		}
	}
	return m
}

// settle makes u's patch what its mask says: a field with its bit is set
// (to the zero value if the entry held none: "" removes a title), one
// without it is not, whatever value the entry held.
func (u *Update) settle() {
	for _, f := range linkFields {
		if f.present != nil {
			f.present(&u.Patch, u.mask&f.bit != 0)
		}
	}
	u.mask = 0 // Patch says it all now
}

// Level is the feature level the fields c sets need (command.LevelLinkMeta,
// ...; 0 for fields every version knows).
func (c *CreateIfAbsent) Level() int {
	level := 0
	var scratch [16]byte
	for _, f := range linkFields {
		if f.since > level && f.create != nil && len(f.create.Put(scratch[:0], f.num, c)) > 0 {
			level = f.since
		}
	}
	return level
}

// Level is the feature level the fields u sets need.
func (u *Update) Level() int {
	level := 0
	for _, f := range linkFields {
		if f.since > level && f.set != nil && f.set(&u.Patch) {
			level = f.since
		}
	}
	return level
}
