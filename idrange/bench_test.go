package idrange

import "testing"

var sinkCode string
var sinkID uint64

// ids spreads benchmark IDs over the leased range.
func benchID(i int) uint64 { return uint64(i)*7919 + 1 }

func BenchmarkBase62Encode(b *testing.B) {
	b.ReportAllocs()
	for i := range b.N {
		sinkCode = Encode(benchID(i))
	}
}

func BenchmarkBase62Decode(b *testing.B) {
	codes := make([]string, 1024)
	for i := range codes {
		codes[i] = Encode(benchID(i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id, err := Decode(codes[i%len(codes)])
		if err != nil {
			b.Fatal(err)
		}
		sinkID = id
	}
}

func BenchmarkPermute(b *testing.B) {
	p, err := NewPermutation([]byte("bench-key-16byte"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := range b.N {
		v, err := p.Permute(benchID(i))
		if err != nil {
			b.Fatal(err)
		}
		sinkID = v
	}
}

// BenchmarkCoderCode is an ID to its code as the create path makes it, per
// mode: the permutation plus base62, or base62 alone.
func BenchmarkCoderCode(b *testing.B) {
	for _, mode := range []Mode{ModePermuted, ModeSequential} {
		b.Run(string(mode), func(b *testing.B) {
			c, err := NewCoder(mode, []byte("bench-key-16byte"))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for i := range b.N {
				code, err := c.Code(benchID(i))
				if err != nil {
					b.Fatal(err)
				}
				sinkCode = code
			}
		})
	}
}
