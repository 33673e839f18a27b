package httpapi

import "testing"

// BenchmarkQRRender is one QR code of a 27-character short URL drawn as
// the route draws it: a PNG of the default 300 and the largest 2048
// pixels, and an SVG.
func BenchmarkQRRender(b *testing.B) {
	for _, c := range []struct {
		name string
		p    qrParams
	}{
		{"png-300", qrParams{png: true, size: 300, margin: 4}},
		{"png-2048", qrParams{png: true, size: 2048, margin: 4}},
		{"svg", qrParams{size: 300, margin: 4}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := renderQR("http://localhost:8080/MG9ViST", c.p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
