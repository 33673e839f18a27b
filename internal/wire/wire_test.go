package wire

import (
	"errors"
	"math"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

type msg struct {
	Name  string
	N     uint32
	At    time.Time
	F     float64
	Tags  []string
	Quiet string
}

var msgCodec = NewCodec[msg](nil,
	String(1, func(m *msg) *string { return &m.Name }),
	Uint(2, func(m *msg) *uint32 { return &m.N }),
	Time(3, func(m *msg) *time.Time { return &m.At }),
	Float(4, func(m *msg) *float64 { return &m.F }),
	Strings(5, func(m *msg) *[]string { return &m.Tags }),
	Only(String(40, func(m *msg) *string { return &m.Quiet }), func(m *msg) bool { return m.Quiet != "skip" }),
)

// TestCodecRules: zero values are left out, unknown fields are skipped,
// a value past its type's range reads as the maximum, and malformed input
// fails with ErrDecode rather than reading garbage.
func TestCodecRules(t *testing.T) {
	t.Parallel()
	if b := msgCodec.Append(nil, &msg{}); len(b) != 0 {
		t.Fatalf("a zero message encodes as %x", b)
	}
	at := time.Date(2026, 11, 27, 1, 2, 3, 4, time.UTC)
	b := msgCodec.Append(nil, &msg{Name: "a", N: 7, At: at, F: 1.5, Tags: []string{"x", ""}, Quiet: "q"})
	// A field a newer version added, between known ones.
	b = AppendString(b, 30, "from the future")
	b = AppendUint(b, 2, 1<<40) // past uint32: the last value wins, clamped
	got, err := msgCodec.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "a" || got.N != math.MaxUint32 || !got.At.Equal(at) || got.F != 1.5 || len(got.Tags) != 2 || got.Quiet != "q" {
		t.Fatalf("decoded %+v", got)
	}
	if b := msgCodec.Append(nil, &msg{Quiet: "skip"}); len(b) != 0 {
		t.Fatalf("Only wrote a field its condition refused: %x", b)
	}
	bad := map[string][]byte{
		"truncated":       b[:len(b)-1],
		"wrong wire type": protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 3),
		"bad tag":         {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"NaN":             AppendFloat(nil, 4, math.NaN()),
	}
	for name, in := range bad {
		if _, err := msgCodec.Decode(in); !errors.Is(err, ErrDecode) {
			t.Errorf("%s: %v, want ErrDecode", name, err)
		}
	}
}
