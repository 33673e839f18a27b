package backup

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"
)

// sample writes a backup of two shards (the second over several frames).
func sample(t testing.TB) ([]byte, Manifest) {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{ClusterID: "c1", CreatedAt: time.Unix(1800000000, 0).UTC(), Node: "n1", Version: "test", Settings: []byte{1, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Meta(Meta{NextID: 4096, Keys: [][]byte{[]byte("k1"), []byte("k2")}, Blocked: [][]byte{[]byte("evil")}}); err != nil {
		t.Fatal(err)
	}
	if err := w.BeginShard(0, 17); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := w.Record(Record{Code: fmt.Sprintf("a%d", i), Link: []byte("link"), Clicks: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.BeginShard(1, 5); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 64<<10)
	for i := range 40 { // 2.5 MiB: three frames
		if err := w.Record(Record{Code: fmt.Sprintf("b%d", i), Link: big}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.BeginShard(2, 1); err != nil { // an empty shard
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), w.Manifest()
}

// TestRoundTrip: what the writer wrote is read back in order, with the
// manifest's counts.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	file, wrote := sample(t)
	var meta *Meta
	got := map[uint32][]string{}
	frames := 0
	h, m, err := Read(bytes.NewReader(file), Visitor{
		Meta: func(m *Meta) error { meta = m; return nil },
		Records: func(shard uint32, rs []Record) error {
			frames++
			for _, r := range rs {
				got[shard] = append(got[shard], r.Code)
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if h.Format != Format || h.ClusterID != "c1" || !bytes.Equal(h.Settings, []byte{1, 2, 3}) || !h.CreatedAt.Equal(time.Unix(1800000000, 0)) {
		t.Fatalf("header %+v", h)
	}
	if meta == nil || meta.NextID != 4096 || len(meta.Keys) != 2 || string(meta.Keys[1]) != "k2" || string(meta.Blocked[0]) != "evil" {
		t.Fatalf("meta %+v", meta)
	}
	if len(got[0]) != 3 || len(got[1]) != 40 || got[1][39] != "b39" || frames < 4 {
		t.Fatalf("records %d, %d in %d frames", len(got[0]), len(got[1]), frames)
	}
	if len(m.Shards) != 3 || m.Shards[1].Records != 40 || m.Shards[1].ReadAt != 5 || m.Shards[2].Records != 0 || m.Keys != 2 ||
		!bytes.Equal(m.SHA256, wrote.SHA256) {
		t.Fatalf("manifest %+v", m)
	}
}

// TestDamageIsRefused: a changed byte anywhere, a cut anywhere, bytes
// after the end, another file or a newer format: each is refused with its
// reason, and Read says which.
func TestDamageIsRefused(t *testing.T) {
	t.Parallel()
	file, _ := sample(t)
	for _, at := range []int{0, len(Magic), len(Magic) + 3, len(Magic) + 40, len(file) / 2, len(file) - 40, len(file) - 1} {
		bad := bytes.Clone(file)
		bad[at] ^= 0x20
		_, _, err := Read(bytes.NewReader(bad), Visitor{})
		if !errors.Is(err, ErrDamaged) && !errors.Is(err, ErrNotBackup) && !errors.Is(err, ErrTruncated) {
			t.Errorf("byte %d changed: %v", at, err)
		}
	}
	for _, n := range []int{0, 5, len(Magic), len(Magic) + 4, len(file) / 3, len(file) - 50, len(file) - 1} {
		if _, _, err := Read(bytes.NewReader(file[:n]), Visitor{}); !errors.Is(err, ErrTruncated) && !(n < len(Magic) && errors.Is(err, ErrNotBackup)) {
			t.Errorf("cut at %d of %d: %v", n, len(file), err)
		}
	}
	if _, _, err := Read(bytes.NewReader(append(bytes.Clone(file), 0)), Visitor{}); !errors.Is(err, ErrDamaged) {
		t.Errorf("a byte after the manifest: %v", err)
	}
	if _, _, err := Read(bytes.NewReader([]byte("code,url\nabc,https://e.example\n")), Visitor{}); !errors.Is(err, ErrNotBackup) {
		t.Errorf("a CSV file: %v", err)
	}
	newer := appendFrame([]byte(Magic), kindHeader, headerCodec.Append(nil, &Header{Format: Format + 1}))
	if _, _, err := Read(bytes.NewReader(newer), Visitor{}); !errors.Is(err, ErrNewerFormat) {
		t.Errorf("format %d: %v", Format+1, err)
	}
}

// TestVisitorErrorEndsRead: an error from the visitor is Read's.
func TestVisitorErrorEndsRead(t *testing.T) {
	t.Parallel()
	file, _ := sample(t)
	stop := errors.New("stop")
	n := 0
	_, _, err := Read(bytes.NewReader(file), Visitor{Records: func(uint32, []Record) error { n++; return stop }})
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("%v after %d calls", err, n)
	}
}
