package httpapi_test

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/makiuchi-d/gozxing"
	"github.com/makiuchi-d/gozxing/qrcode"

	"github.com/linkraft/linkraft/link"
)

// decodeQR reads a QR code from img with an independent decoder.
func decodeQR(t *testing.T, img image.Image) string {
	t.Helper()
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		t.Fatal(err)
	}
	res, err := qrcode.NewQRCodeReader().Decode(bmp, nil)
	if err != nil {
		t.Fatalf("the QR code does not decode: %v", err)
	}
	return res.GetText()
}

var svgSquare = regexp.MustCompile(`M(\d+),(\d+)h1v1h-1z`)

// rasterSVG draws the unit squares of an SVG from qrSVG, 8 pixels a
// module, in a viewBox of n modules.
func rasterSVG(t *testing.T, svg []byte) image.Image {
	t.Helper()
	m := regexp.MustCompile(`viewBox="0 0 (\d+) (\d+)"`).FindSubmatch(svg)
	if m == nil {
		t.Fatalf("no viewBox in %.200s", svg)
	}
	n, _ := strconv.Atoi(string(m[1]))
	const px = 8
	img := image.NewGray(image.Rect(0, 0, n*px, n*px))
	for i := range img.Pix {
		img.Pix[i] = 0xff
	}
	for _, sq := range svgSquare.FindAllSubmatch(svg, -1) {
		x, _ := strconv.Atoi(string(sq[1]))
		y, _ := strconv.Atoi(string(sq[2]))
		for dy := range px {
			for dx := range px {
				img.Set(x*px+dx, y*px+dy, color.Black)
			}
		}
	}
	return img
}

// TestQRCodesDecodeToTheShortURL: GET /{code}/qr draws the link's short
// URL as a PNG or an SVG that an independent decoder reads back; the image
// is public, cacheable with an ETag, and its query is checked.
func TestQRCodesDecodeToTheShortURL(t *testing.T) {
	t.Parallel()
	tn := startFake(t, link.URLPolicy{}, nil)
	l := tn.create(t, `{"url":"https://example.com/qr","alias":"qr-me"}`)
	short := l["short_url"].(string)
	if l["qr_url"] != short+"/qr" {
		t.Fatalf("qr_url = %v", l["qr_url"])
	}
	for _, size := range []string{"64", "300", "2048"} {
		r := tn.do(t, "GET", "/qr-me/qr?size="+size, "", nil, "Authorization", "")
		if r.status != 200 || r.header.Get("Content-Type") != "image/png" {
			t.Fatalf("png %s: %d %s", size, r.status, r.header.Get("Content-Type"))
		}
		img, err := png.Decode(bytes.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := strconv.Atoi(size)
		if w := img.Bounds().Dx(); w > want || (want >= 300 && w < want*3/4) {
			t.Fatalf("png of size %s is %d pixels wide", size, w)
		}
		if got := decodeQR(t, img); got != short {
			t.Fatalf("png %s decodes to %q, want %q", size, got, short)
		}
	}
	r := tn.do(t, "GET", "/qr-me/qr?format=svg&margin=2", "", nil, "Authorization", "")
	if r.status != 200 || r.header.Get("Content-Type") != "image/svg+xml" {
		t.Fatalf("svg: %d %s", r.status, r.header.Get("Content-Type"))
	}
	if got := decodeQR(t, rasterSVG(t, r.body)); got != short {
		t.Fatalf("svg decodes to %q, want %q", got, short)
	}
	// Cacheable: the same ETag again, and a conditional request is 304.
	etag := r.header.Get("ETag")
	if etag == "" || r.header.Get("Cache-Control") != "public, max-age=86400" {
		t.Fatalf("caching headers: %v", r.header)
	}
	if r := tn.do(t, "GET", "/qr-me/qr?format=svg&margin=2", "", nil, "Authorization", "", "If-None-Match", etag); r.status != 304 || len(r.body) != 0 {
		t.Fatalf("conditional GET: %d %d bytes", r.status, len(r.body))
	}
	if r := tn.do(t, "GET", "/qr-me/qr?format=svg&margin=3", "", nil, "Authorization", "", "If-None-Match", etag); r.status != 200 {
		t.Fatalf("another image with the old ETag: %d", r.status)
	}
	if r := tn.do(t, "HEAD", "/qr-me/qr", "", nil, "Authorization", ""); r.status != 200 || len(r.body) != 0 || r.header.Get("Content-Length") == "" {
		t.Fatalf("HEAD: %d, %d bytes", r.status, len(r.body))
	}
	for _, q := range []string{"format=gif", "size=63", "size=2049", "size=big", "margin=-1", "margin=17"} {
		if r := tn.do(t, "GET", "/qr-me/qr?"+q, "", nil, "Authorization", ""); r.status != 400 || r.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s", q, r.status, r.body)
		}
	}
	if r := tn.do(t, "GET", "/no-such/qr", "", nil, "Authorization", ""); r.status != 404 {
		t.Fatalf("unknown code: %d", r.status)
	}
	if r := tn.do(t, "POST", "/qr-me/qr", "", nil); r.status != 405 {
		t.Fatalf("POST: %d", r.status)
	}
	tn.do(t, "DELETE", "/api/v1/links/qr-me", "", nil)
	if r := tn.do(t, "GET", "/qr-me/qr", "", nil, "Authorization", ""); r.status != 410 {
		t.Fatalf("deleted link: %d", r.status)
	}
}

// TestQRBusyIsUnavailable: with every render slot taken, a QR request waits
// its turn and then answers 503 with Retry-After, not a queue without end;
// once the slots are free it is drawn again.
func TestQRBusyIsUnavailable(t *testing.T) {
	t.Parallel()
	tn := startFake(t, link.URLPolicy{}, nil)
	tn.create(t, `{"url":"https://example.com/busy","alias":"busy-qr"}`)
	release := tn.api.HoldQRSlots(50 * time.Millisecond)
	r := tn.do(t, "GET", "/busy-qr/qr", "", nil, "Authorization", "")
	release()
	if r.status != 503 || r.header.Get("Retry-After") == "" || r.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("all slots busy: %d %v %s", r.status, r.header, r.body)
	}
	if r := tn.do(t, "GET", "/busy-qr/qr", "", nil, "Authorization", ""); r.status != 200 {
		t.Fatalf("slots free again: %d", r.status)
	}
}
