package backup

import (
	"bytes"
	"testing"
)

// FuzzRead: any bytes given to a restore are read without a panic or an
// unbounded allocation (a frame is at most MaxFrame); what Read accepts
// has a manifest whose digest and counts it checked.
func FuzzRead(f *testing.F) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{ClusterID: "c"})
	if err != nil {
		f.Fatal(err)
	}
	_ = w.Meta(Meta{NextID: 7, Keys: [][]byte{[]byte("k")}})
	_ = w.BeginShard(0, 3)
	_ = w.Record(Record{Code: "abc", Link: []byte("l"), Clicks: []byte{1}})
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	whole := buf.Bytes()
	f.Add(whole)
	f.Add(whole[:len(whole)/2])
	f.Add([]byte(Magic))
	f.Add(appendFrame([]byte(Magic), kindHeader, headerCodec.Append(nil, &Header{Format: Format})))
	f.Fuzz(func(t *testing.T, b []byte) {
		records := 0
		h, m, err := Read(bytes.NewReader(b), Visitor{Records: func(_ uint32, rs []Record) error { records += len(rs); return nil }})
		if err != nil {
			return
		}
		if h == nil || m == nil || len(m.SHA256) != 32 {
			t.Fatalf("accepted without a header or a digest: %+v %+v", h, m)
		}
		var counted uint64
		for _, s := range m.Shards {
			counted += s.Records
		}
		if counted != uint64(records) {
			t.Fatalf("the manifest counts %d records, the visitor saw %d", counted, records)
		}
	})
}
