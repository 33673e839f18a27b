package command

import (
	"testing"
	"time"

	"github.com/linkraft/linkraft/link"
)

var sinkAny any

var benchLink = &link.Link{Code: "abc1234", URL: "https://www.example.com/some/path/of/a/typical/length?utm_source=x", Owner: "alice",
	CreatedAt: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC), UpdatedAt: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC),
	Redirect: 302, Tags: []string{"a"}, Nonce: 77, Version: 1234}

func benchCreate() *CreateIfAbsent {
	return &CreateIfAbsent{Code: benchLink.Code, Now: benchLink.CreatedAt, Nonce: 1, Request: link.CreateRequest{URL: benchLink.URL, Owner: benchLink.Owner, Redirect: 302}}
}

func BenchmarkCreateEncode(b *testing.B) {
	c := benchCreate()
	b.ReportAllocs()
	for b.Loop() {
		sinkAny = c.Encode()
	}
}

func BenchmarkCreateDecode(b *testing.B) {
	data := benchCreate().Encode()
	b.ReportAllocs()
	for b.Loop() {
		v, err := Decode(data)
		if err != nil {
			b.Fatal(err)
		}
		sinkAny = v
	}
}

// BenchmarkLinkDecode is a peer's answer: the wire form of a link.
func BenchmarkLinkDecode(b *testing.B) {
	data := EncodeLink(benchLink)
	b.ReportAllocs()
	for b.Loop() {
		v, err := DecodeLink(data)
		if err != nil {
			b.Fatal(err)
		}
		sinkAny = v
	}
}

// BenchmarkRecordDecode is the codec on the redirect path: a link read
// from bbolt on a cache miss.
func BenchmarkRecordDecode(b *testing.B) {
	v := EncodeRecord(benchLink)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeRecord([]byte(benchLink.Code), v); err != nil {
			b.Fatal(err)
		}
	}
}
