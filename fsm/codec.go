package fsm

import (
	"fmt"
	"iter"
	"math"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// The wire codec of commands and stored records. Every message is
// protobuf-compatible (field number, wire type, value) and written in
// proto3 style: a zero value is left out, repeated values are one field
// each, unknown fields are skipped on reading (forward compatibility).
// A message's codec is its list of fields, each told how to write and read
// its value once (a codec[M]); one loop encodes and one decodes every
// message. The bytes are pinned by testdata/encodings.golden.
//
// The click batch keeps a hand-written streaming codec (clicks.go,
// clickmerge.go): it is applied field by field from the entry without
// building the batch.

// The primitives: proto3 field writers (zero values left out) and a
// reader of fields.

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendUint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendBool(b []byte, num protowire.Number, v bool) []byte {
	if !v {
		return b
	}
	return appendUint(b, num, 1)
}

// appendTime stores unix nanoseconds; the zero time is omitted.
func appendTime(b []byte, num protowire.Number, t time.Time) []byte {
	if t.IsZero() {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, protowire.EncodeZigZag(t.UnixNano()))
}

func appendFloat(b []byte, num protowire.Number, f float64) []byte {
	if f == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, math.Float64bits(f))
}

// fieldReader walks the fields of a protowire body.
type fieldReader struct {
	b   []byte
	err error
}

// next returns the next field number and type; ok is false at the end or on
// error (check r.err).
func (r *fieldReader) next() (protowire.Number, protowire.Type, bool) {
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

// fields walks the fields of the body: the loop body reads each (r.str,
// r.uint, ...) or skips it. The walk ends at the end of the body or at the
// first failure, which r.err holds.
func (r *fieldReader) fields() iter.Seq2[protowire.Number, protowire.Type] {
	return func(yield func(protowire.Number, protowire.Type) bool) {
		for {
			num, typ, ok := r.next()
			if !ok || !yield(num, typ) {
				return
			}
		}
	}
}

// setErr stops the walk with err (a field that read well but is invalid),
// unless it already failed.
func (r *fieldReader) setErr(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *fieldReader) fail(n int) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %v", ErrDecode, protowire.ParseError(n))
	}
}

func (r *fieldReader) want(got, want protowire.Type, num protowire.Number) bool {
	if got != want {
		if r.err == nil {
			r.err = fmt.Errorf("%w: field %d has wire type %d, want %d", ErrDecode, num, got, want)
		}
		return false
	}
	return true
}

func (r *fieldReader) bytes(typ protowire.Type, num protowire.Number) []byte {
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

func (r *fieldReader) str(typ protowire.Type, num protowire.Number) string {
	return string(r.bytes(typ, num))
}

func (r *fieldReader) uint(typ protowire.Type, num protowire.Number) uint64 {
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

func (r *fieldReader) time(typ protowire.Type, num protowire.Number) time.Time {
	v := r.uint(typ, num)
	if r.err != nil {
		return time.Time{}
	}
	return time.Unix(0, protowire.DecodeZigZag(v)).UTC()
}

func (r *fieldReader) float(typ protowire.Type, num protowire.Number) float64 {
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

// skip consumes a field this version does not know (forward compatibility).
func (r *fieldReader) skip(num protowire.Number, typ protowire.Type) {
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
type field[M any] struct {
	num protowire.Number
	// put appends the field of m (nothing for a zero value).
	put func(b []byte, num protowire.Number, m *M) []byte
	// get reads the field's value (of wire type typ) from r into m and
	// returns r past it (r is passed by value so that it stays on the
	// decoder's stack).
	get func(r fieldReader, typ protowire.Type, num protowire.Number, m *M) fieldReader
}

// codec is a message: its fields in writing order, and what a decoded
// message must hold (nil: anything).
type codec[M any] struct {
	fields []field[M]
	check  func(m *M) error
	// byNum maps a field number below maxIndexed to its index+1 in fields.
	byNum [maxIndexed]uint8
}

// maxIndexed bounds the field numbers looked up by table; larger ones are
// searched.
const maxIndexed = 32

func newCodec[M any](check func(*M) error, fields ...field[M]) *codec[M] {
	c := &codec[M]{fields: fields, check: check}
	for i, f := range fields {
		if f.num < maxIndexed {
			c.byNum[f.num] = uint8(i + 1)
		}
	}
	return c
}

// field returns the field numbered num, or nil.
func (c *codec[M]) field(num protowire.Number) *field[M] {
	if num >= 0 && num < maxIndexed {
		if i := c.byNum[num]; i > 0 {
			return &c.fields[i-1]
		}
		return nil
	}
	for i := range c.fields {
		if c.fields[i].num == num {
			return &c.fields[i]
		}
	}
	return nil
}

// append writes m's fields after b.
func (c *codec[M]) append(b []byte, m *M) []byte {
	for i := range c.fields {
		b = c.fields[i].put(b, c.fields[i].num, m)
	}
	return b
}

// decodeInto reads body into m.
func (c *codec[M]) decodeInto(body []byte, m *M) error {
	r := fieldReader{b: body}
	for num, typ := range r.fields() {
		if f := c.field(num); f != nil {
			r = f.get(r, typ, num, m)
		} else {
			r.skip(num, typ)
		}
	}
	if r.err == nil && c.check != nil {
		return c.check(m)
	}
	return r.err
}

// decode reads body into a new message.
func (c *codec[M]) decode(body []byte) (*M, error) {
	m := new(M)
	if err := c.decodeInto(body, m); err != nil {
		return nil, err
	}
	return m, nil
}

// needCode is the check of messages that name a link.
func needCode(what string, code string) error {
	if code == "" {
		return fmt.Errorf("%w: %s without a code", ErrDecode, what)
	}
	return nil
}

func strField[M any](num protowire.Number, p func(*M) *string) field[M] {
	return field[M]{num: num,
		put: func(b []byte, num protowire.Number, m *M) []byte { return appendString(b, num, *p(m)) },
		get: func(r fieldReader, typ protowire.Type, num protowire.Number, m *M) fieldReader {
			*p(m) = r.str(typ, num)
			return r
		},
	}
}

// bytesField reads a copy of the value (the body may be a bbolt page).
func bytesField[M any](num protowire.Number, p func(*M) *[]byte) field[M] {
	return field[M]{num: num,
		put: func(b []byte, num protowire.Number, m *M) []byte { return appendBytes(b, num, *p(m)) },
		get: func(r fieldReader, typ protowire.Type, num protowire.Number, m *M) fieldReader {
			*p(m) = append([]byte(nil), r.bytes(typ, num)...)
			return r
		},
	}
}

// uintField is a varint of an unsigned type; a value past the type's range
// reads as its maximum.
func uintField[M any, T ~uint8 | ~uint16 | ~uint32 | ~uint64](num protowire.Number, p func(*M) *T) field[M] {
	maxT := uint64(^T(0))
	return field[M]{num: num,
		put: func(b []byte, num protowire.Number, m *M) []byte { return appendUint(b, num, uint64(*p(m))) },
		get: func(r fieldReader, typ protowire.Type, num protowire.Number, m *M) fieldReader {
			*p(m) = T(min(r.uint(typ, num), maxT))
			return r
		},
	}
}

// intField is a non-negative int (a status code) as a varint; larger
// values read as math.MaxInt32.
func intField[M any](num protowire.Number, p func(*M) *int) field[M] {
	return field[M]{num: num,
		put: func(b []byte, num protowire.Number, m *M) []byte { return appendUint(b, num, uint64(*p(m))) },
		get: func(r fieldReader, typ protowire.Type, num protowire.Number, m *M) fieldReader {
			*p(m) = smallInt(r.uint(typ, num))
			return r
		},
	}
}

func boolField[M any](num protowire.Number, p func(*M) *bool) field[M] {
	return field[M]{num: num,
		put: func(b []byte, num protowire.Number, m *M) []byte { return appendBool(b, num, *p(m)) },
		get: func(r fieldReader, typ protowire.Type, num protowire.Number, m *M) fieldReader {
			*p(m) = r.uint(typ, num) != 0
			return r
		},
	}
}

// timeField is Unix nanoseconds (zigzag); the zero time is left out.
func timeField[M any](num protowire.Number, p func(*M) *time.Time) field[M] {
	return field[M]{num: num,
		put: func(b []byte, num protowire.Number, m *M) []byte { return appendTime(b, num, *p(m)) },
		get: func(r fieldReader, typ protowire.Type, num protowire.Number, m *M) fieldReader {
			*p(m) = r.time(typ, num)
			return r
		},
	}
}

// floatField is a finite float64; NaN and infinities are refused.
func floatField[M any](num protowire.Number, p func(*M) *float64) field[M] {
	return field[M]{num: num,
		put: func(b []byte, num protowire.Number, m *M) []byte { return appendFloat(b, num, *p(m)) },
		get: func(r fieldReader, typ protowire.Type, num protowire.Number, m *M) fieldReader {
			v := r.float(typ, num)
			if math.IsNaN(v) || math.IsInf(v, 0) {
				r.setErr(fmt.Errorf("%w: field %d is %v", ErrDecode, num, v))
				return r
			}
			*p(m) = v
			return r
		},
	}
}

// stringsField is a repeated string, one field per value (empty ones too).
func stringsField[M any](num protowire.Number, p func(*M) *[]string) field[M] {
	return field[M]{num: num,
		put: func(b []byte, num protowire.Number, m *M) []byte {
			for _, s := range *p(m) {
				b = protowire.AppendTag(b, num, protowire.BytesType)
				b = protowire.AppendString(b, s)
			}
			return b
		},
		get: func(r fieldReader, typ protowire.Type, num protowire.Number, m *M) fieldReader {
			*p(m) = append(*p(m), r.str(typ, num))
			return r
		},
	}
}

// messagesField is a repeated message of codec sub, one field per value.
func messagesField[M, S any](num protowire.Number, sub *codec[S], p func(*M) *[]S) field[M] {
	return field[M]{num: num,
		put: func(b []byte, num protowire.Number, m *M) []byte {
			var body []byte
			for i := range *p(m) {
				body = sub.append(body[:0], &(*p(m))[i])
				b = protowire.AppendTag(b, num, protowire.BytesType)
				b = protowire.AppendBytes(b, body)
			}
			return b
		},
		get: func(r fieldReader, typ protowire.Type, num protowire.Number, m *M) fieldReader {
			body := r.bytes(typ, num)
			if r.err != nil {
				return r
			}
			// Decoded in place: a local value would escape to the heap
			// through the field table, one allocation per element.
			var zero S
			*p(m) = append(*p(m), zero)
			if err := sub.decodeInto(body, &(*p(m))[len(*p(m))-1]); err != nil {
				r.setErr(err)
			}
			return r
		},
	}
}

// only makes f conditional: it is written only when write(m) holds.
func only[M any](f field[M], write func(*M) bool) field[M] {
	put := f.put
	f.put = func(b []byte, num protowire.Number, m *M) []byte {
		if !write(m) {
			return b
		}
		return put(b, num, m)
	}
	return f
}

// messageField is one nested message of codec sub, always written (an
// empty message too).
func messageField[M, S any](num protowire.Number, sub *codec[S], p func(*M) *S) field[M] {
	return field[M]{num: num,
		put: func(b []byte, num protowire.Number, m *M) []byte {
			return appendMessage(b, num, sub.append(nil, p(m)))
		},
		get: func(r fieldReader, typ protowire.Type, num protowire.Number, m *M) fieldReader {
			body := r.bytes(typ, num)
			if r.err == nil {
				if err := sub.decodeInto(body, p(m)); err != nil {
					r.setErr(err)
				}
			}
			return r
		},
	}
}

// countsField is a breakdown (key → count) as one {key, n} pair message
// per key, in key order; a key read twice counts the sum.
func countsField[M any](num protowire.Number, p func(*M) *map[string]uint64) field[M] {
	return field[M]{num: num,
		put: func(b []byte, num protowire.Number, m *M) []byte {
			mp := *p(m)
			for _, k := range sortedKeys(mp) {
				b = appendPair(b, num, k, mp[k])
			}
			return b
		},
		get: func(r fieldReader, typ protowire.Type, num protowire.Number, m *M) fieldReader {
			body := r.bytes(typ, num)
			if r.err != nil {
				return r
			}
			key, n, err := readPair(body)
			if err != nil {
				r.setErr(err)
				return r
			}
			if *p(m) == nil {
				*p(m) = map[string]uint64{}
			}
			(*p(m))[string(key)] += n
			return r
		},
	}
}
