// Package wire is linkraft's message codec: protobuf-compatible fields
// (field number, wire type, value) written in proto3 style (a zero value is
// left out, repeated values are one field each) and read with unknown
// fields skipped, so a newer version may add fields.
//
// A message's codec is its list of fields (a Codec[M] of Field[M]), each
// told once how to write and read its value: one loop encodes and one
// decodes every message. The command package defines linkraft's messages
// with it; Reader is also the streaming reader for the few messages read
// in place rather than decoded (the click batch).
package wire

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// ErrDecode is wrapped by every decoding failure.
var ErrDecode = errors.New("cannot decode")

// The primitives: proto3 field writers (zero values left out) and a
// reader of fields.

// AppendString appends string field num (nothing for "").
func AppendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// AppendBytes appends bytes field num (nothing for an empty value).
func AppendBytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// AppendUint appends varint field num (nothing for 0).
func AppendUint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// AppendBool appends bool field num as a varint 1 (nothing for false).
func AppendBool(b []byte, num protowire.Number, v bool) []byte {
	if !v {
		return b
	}
	return AppendUint(b, num, 1)
}

// AppendTime stores unix nanoseconds; the zero time is omitted.
func AppendTime(b []byte, num protowire.Number, t time.Time) []byte {
	if t.IsZero() {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, protowire.EncodeZigZag(t.UnixNano()))
}

// AppendMessage appends an encoded message as field num (always, an
// empty one too).
func AppendMessage(b []byte, num protowire.Number, msg []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, msg)
}

// AppendFloat appends float field num as fixed64 (nothing for 0).
func AppendFloat(b []byte, num protowire.Number, f float64) []byte {
	if f == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, math.Float64bits(f))
}

// Reader walks the fields of a protowire body.
type Reader struct {
	b   []byte
	err error
}

// NewReader returns a Reader of body.
func NewReader(body []byte) Reader { return Reader{b: body} }

// Err is the failure that ended the walk, if any.
func (r *Reader) Err() error { return r.err }

// next returns the next field number and type; ok is false at the end or on
// error (check r.err).
func (r *Reader) next() (protowire.Number, protowire.Type, bool) {
	if r.err != nil || len(r.b) == 0 {
		return 0, 0, false
	}
	num, typ, n := protowire.ConsumeTag(r.b)
	if n < 0 {
		r.err = fmt.Errorf("%w: %v", ErrDecode, protowire.ParseError(n))
		return 0, 0, false
	}
	r.b = r.b[n:]
	return num, typ, true
}

// Fields walks the fields of the body: the loop body reads each (r.str,
// r.uint, ...) or skips it. The walk ends at the end of the body or at the
// first failure, which r.err holds.
func (r *Reader) Fields() iter.Seq2[protowire.Number, protowire.Type] {
	return func(yield func(protowire.Number, protowire.Type) bool) {
		for {
			num, typ, ok := r.next()
			if !ok || !yield(num, typ) {
				return
			}
		}
	}
}

// SetErr stops the walk with err (a field that read well but is invalid),
// unless it already failed.
func (r *Reader) SetErr(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *Reader) fail(n int) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %v", ErrDecode, protowire.ParseError(n))
	}
}

func (r *Reader) want(got, want protowire.Type, num protowire.Number) bool {
	if got != want {
		if r.err == nil {
			r.err = fmt.Errorf("%w: field %d has wire type %d, want %d", ErrDecode, num, got, want)
		}
		return false
	}
	return true
}

// Bytes reads a bytes field; the value is a view of the body.
func (r *Reader) Bytes(typ protowire.Type, num protowire.Number) []byte {
	if !r.want(typ, protowire.BytesType, num) {
		return nil
	}
	v, n := protowire.ConsumeBytes(r.b)
	if n < 0 {
		r.fail(n)
		return nil
	}
	r.b = r.b[n:]
	return v
}

// Str reads a string field.
func (r *Reader) Str(typ protowire.Type, num protowire.Number) string {
	return string(r.Bytes(typ, num))
}

// Uint reads a varint field.
func (r *Reader) Uint(typ protowire.Type, num protowire.Number) uint64 {
	if !r.want(typ, protowire.VarintType, num) {
		return 0
	}
	v, n := protowire.ConsumeVarint(r.b)
	if n < 0 {
		r.fail(n)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Time reads a time field (Unix nanoseconds, zigzag) in UTC.
func (r *Reader) Time(typ protowire.Type, num protowire.Number) time.Time {
	v := r.Uint(typ, num)
	if r.err != nil {
		return time.Time{}
	}
	return time.Unix(0, protowire.DecodeZigZag(v)).UTC()
}

// Float reads a fixed64 float field.
func (r *Reader) Float(typ protowire.Type, num protowire.Number) float64 {
	if !r.want(typ, protowire.Fixed64Type, num) {
		return 0
	}
	v, n := protowire.ConsumeFixed64(r.b)
	if n < 0 {
		r.fail(n)
		return 0
	}
	r.b = r.b[n:]
	return math.Float64frombits(v)
}

// Skip consumes a field this version does not know (forward compatibility).
func (r *Reader) Skip(num protowire.Number, typ protowire.Type) {
	n := protowire.ConsumeFieldValue(num, typ, r.b)
	if n < 0 {
		r.fail(n)
		return
	}
	r.b = r.b[n:]
}

func smallInt(v uint64) int {
	if v > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(v)
}

// field is one field of message M.
type Field[M any] struct {
	Num protowire.Number
	// Put appends the field of m (nothing for a zero value).
	Put func(b []byte, num protowire.Number, m *M) []byte
	// Get reads the field's value (of wire type typ) from r into m and
	// returns r past it (r is passed by value so that it stays on the
	// decoder's stack).
	Get func(r Reader, typ protowire.Type, num protowire.Number, m *M) Reader
}

// codec is a message: its fields in writing order, and what a decoded
// message must hold (nil: anything).
type Codec[M any] struct {
	fields []Field[M]
	check  func(m *M) error
	// byNum maps a field number below maxIndexed to its index+1 in fields.
	byNum [maxIndexed]uint8
}

// maxIndexed bounds the field numbers looked up by table; larger ones are
// searched.
const maxIndexed = 32

// NewCodec returns the codec of a message with fields, in writing order;
// check (nil: none) is what every decoded message must satisfy.
func NewCodec[M any](check func(*M) error, fields ...Field[M]) *Codec[M] {
	c := &Codec[M]{fields: fields, check: check}
	for i, f := range fields {
		if f.Num < maxIndexed {
			c.byNum[f.Num] = uint8(i + 1)
		}
	}
	return c
}

// field returns the field numbered num, or nil.
func (c *Codec[M]) field(num protowire.Number) *Field[M] {
	if num >= 0 && num < maxIndexed {
		if i := c.byNum[num]; i > 0 {
			return &c.fields[i-1]
		}
		return nil
	}
	for i := range c.fields {
		if c.fields[i].Num == num {
			return &c.fields[i]
		}
	}
	return nil
}

// Append writes m's fields after b.
func (c *Codec[M]) Append(b []byte, m *M) []byte {
	for i := range c.fields {
		b = c.fields[i].Put(b, c.fields[i].Num, m)
	}
	return b
}

// DecodeInto reads body into m.
func (c *Codec[M]) DecodeInto(body []byte, m *M) error {
	r := NewReader(body)
	for num, typ := range r.Fields() {
		if f := c.field(num); f != nil {
			r = f.Get(r, typ, num, m)
		} else {
			r.Skip(num, typ)
		}
	}
	if r.err == nil && c.check != nil {
		return c.check(m)
	}
	return r.err
}

// Decode reads body into a new message.
func (c *Codec[M]) Decode(body []byte) (*M, error) {
	m := new(M)
	if err := c.DecodeInto(body, m); err != nil {
		return nil, err
	}
	return m, nil
}

// String is a string field.
func String[M any](num protowire.Number, p func(*M) *string) Field[M] {
	return Field[M]{Num: num,
		Put: func(b []byte, num protowire.Number, m *M) []byte { return AppendString(b, num, *p(m)) },
		Get: func(r Reader, typ protowire.Type, num protowire.Number, m *M) Reader {
			*p(m) = r.Str(typ, num)
			return r
		},
	}
}

// Bytes reads a copy of the value (the body may be a bbolt page).
func Bytes[M any](num protowire.Number, p func(*M) *[]byte) Field[M] {
	return Field[M]{Num: num,
		Put: func(b []byte, num protowire.Number, m *M) []byte { return AppendBytes(b, num, *p(m)) },
		Get: func(r Reader, typ protowire.Type, num protowire.Number, m *M) Reader {
			*p(m) = append([]byte(nil), r.Bytes(typ, num)...)
			return r
		},
	}
}

// Uint is a varint of an unsigned type; a value past the type's range
// reads as its maximum.
func Uint[M any, T ~uint8 | ~uint16 | ~uint32 | ~uint64](num protowire.Number, p func(*M) *T) Field[M] {
	maxT := uint64(^T(0))
	return Field[M]{Num: num,
		Put: func(b []byte, num protowire.Number, m *M) []byte { return AppendUint(b, num, uint64(*p(m))) },
		Get: func(r Reader, typ protowire.Type, num protowire.Number, m *M) Reader {
			*p(m) = T(min(r.Uint(typ, num), maxT))
			return r
		},
	}
}

// Int is a non-negative int (a status code) as a varint; larger
// values read as math.MaxInt32.
func Int[M any](num protowire.Number, p func(*M) *int) Field[M] {
	return Field[M]{Num: num,
		Put: func(b []byte, num protowire.Number, m *M) []byte { return AppendUint(b, num, uint64(*p(m))) },
		Get: func(r Reader, typ protowire.Type, num protowire.Number, m *M) Reader {
			*p(m) = smallInt(r.Uint(typ, num))
			return r
		},
	}
}

// Bool is a bool field.
func Bool[M any](num protowire.Number, p func(*M) *bool) Field[M] {
	return Field[M]{Num: num,
		Put: func(b []byte, num protowire.Number, m *M) []byte { return AppendBool(b, num, *p(m)) },
		Get: func(r Reader, typ protowire.Type, num protowire.Number, m *M) Reader {
			*p(m) = r.Uint(typ, num) != 0
			return r
		},
	}
}

// Time is Unix nanoseconds (zigzag); the zero time is left out.
func Time[M any](num protowire.Number, p func(*M) *time.Time) Field[M] {
	return Field[M]{Num: num,
		Put: func(b []byte, num protowire.Number, m *M) []byte { return AppendTime(b, num, *p(m)) },
		Get: func(r Reader, typ protowire.Type, num protowire.Number, m *M) Reader {
			*p(m) = r.Time(typ, num)
			return r
		},
	}
}

// Float is a finite float64; NaN and infinities are refused.
func Float[M any](num protowire.Number, p func(*M) *float64) Field[M] {
	return Field[M]{Num: num,
		Put: func(b []byte, num protowire.Number, m *M) []byte { return AppendFloat(b, num, *p(m)) },
		Get: func(r Reader, typ protowire.Type, num protowire.Number, m *M) Reader {
			v := r.Float(typ, num)
			if math.IsNaN(v) || math.IsInf(v, 0) {
				r.SetErr(fmt.Errorf("%w: field %d is %v", ErrDecode, num, v))
				return r
			}
			*p(m) = v
			return r
		},
	}
}

// Strings is a repeated string, one field per value (empty ones too).
func Strings[M any](num protowire.Number, p func(*M) *[]string) Field[M] {
	return Field[M]{Num: num,
		Put: func(b []byte, num protowire.Number, m *M) []byte {
			for _, s := range *p(m) {
				b = protowire.AppendTag(b, num, protowire.BytesType)
				b = protowire.AppendString(b, s)
			}
			return b
		},
		Get: func(r Reader, typ protowire.Type, num protowire.Number, m *M) Reader {
			*p(m) = append(*p(m), r.Str(typ, num))
			return r
		},
	}
}

// Messages is a repeated message of codec sub, one field per value.
func Messages[M, S any](num protowire.Number, sub *Codec[S], p func(*M) *[]S) Field[M] {
	return Field[M]{Num: num,
		Put: func(b []byte, num protowire.Number, m *M) []byte {
			var body []byte
			for i := range *p(m) {
				body = sub.Append(body[:0], &(*p(m))[i])
				b = protowire.AppendTag(b, num, protowire.BytesType)
				b = protowire.AppendBytes(b, body)
			}
			return b
		},
		Get: func(r Reader, typ protowire.Type, num protowire.Number, m *M) Reader {
			body := r.Bytes(typ, num)
			if r.err != nil {
				return r
			}
			// Decoded in place: a local value would escape to the heap
			// through the field table, one allocation per element.
			var zero S
			*p(m) = append(*p(m), zero)
			if err := sub.DecodeInto(body, &(*p(m))[len(*p(m))-1]); err != nil {
				r.SetErr(err)
			}
			return r
		},
	}
}

// only makes f conditional: it is written only when write(m) holds.
func Only[M any](f Field[M], write func(*M) bool) Field[M] {
	put := f.Put
	f.Put = func(b []byte, num protowire.Number, m *M) []byte {
		if !write(m) {
			return b
		}
		return put(b, num, m)
	}
	return f
}

// Message is one nested message of codec sub, always written (an
// empty message too).
func Message[M, S any](num protowire.Number, sub *Codec[S], p func(*M) *S) Field[M] {
	return Field[M]{Num: num,
		Put: func(b []byte, num protowire.Number, m *M) []byte {
			return AppendMessage(b, num, sub.Append(nil, p(m)))
		},
		Get: func(r Reader, typ protowire.Type, num protowire.Number, m *M) Reader {
			body := r.Bytes(typ, num)
			if r.err == nil {
				if err := sub.DecodeInto(body, p(m)); err != nil {
					r.SetErr(err)
				}
			}
			return r
		},
	}
}

// Value is the field of a message that is one value: the kind of a field
// (String[string], Time[time.Time], ...) to lift into a message with At or
// Optional.
func Value[T any](kind func(protowire.Number, func(*T) *T) Field[T], num protowire.Number) Field[T] {
	return kind(num, func(v *T) *T { return v })
}

// At is f, a field of a value T, as a field of the message M that holds
// the value where p says.
func At[M, T any](f Field[T], p func(*M) *T) Field[M] {
	put, get := f.Put, f.Get
	return Field[M]{Num: f.Num,
		Put: func(b []byte, num protowire.Number, m *M) []byte { return put(b, num, p(m)) },
		Get: func(r Reader, typ protowire.Type, num protowire.Number, m *M) Reader { return get(r, typ, num, p(m)) },
	}
}

// Optional is f, a field of a value T, as a field of the message M that
// holds a pointer to the value where p says: written only when the
// pointer is set (and the value is not zero), and read into a new value.
// Whether a zero value was set is for the message to say (an update's
// mask).
func Optional[M, T any](f Field[T], p func(*M) **T) Field[M] {
	put, get := f.Put, f.Get
	return Field[M]{Num: f.Num,
		Put: func(b []byte, num protowire.Number, m *M) []byte {
			if v := *p(m); v != nil {
				return put(b, num, v)
			}
			return b
		},
		Get: func(r Reader, typ protowire.Type, num protowire.Number, m *M) Reader {
			v := p(m)
			if *v == nil {
				*v = new(T)
			}
			return get(r, typ, num, *v)
		},
	}
}
