package fsm

import (
	"fmt"
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
	for {
		num, typ, ok := r.next()
		if !ok {
			break
		}
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
			var v S
			if err := sub.decodeInto(body, &v); err != nil {
				r.setErr(err)
				return r
			}
			*p(m) = append(*p(m), v)
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
