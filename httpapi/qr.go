package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"strconv"
	"strings"
	"time"

	goqr "github.com/piglig/go-qr"

	"github.com/linkraft/linkraft/link"
)

// QR code bounds: the image's edge in pixels and the quiet zone in
// modules.
const (
	qrMinSize, qrMaxSize, qrDefaultSize = 64, 2048, 300
	qrMaxMargin, qrDefaultMargin        = 16, 4
	// qrRenders bounds the QR codes rendered at once: a 2048-pixel PNG is a
	// 4 MB image and some tens of milliseconds of CPU, on a public route.
	qrRenders = 4
	// qrWait is how long a request waits for a render slot before 503.
	qrWait = 5 * time.Second
)

func (s *Server) registerQRRoutes() {
	// fixedRoute: POST /{code}+ is 405, not the password form of /{code}.
	s.fixedRoute("/{code}+", s.handlePreview, http.MethodGet, http.MethodHead)
	s.fixedRoute("/{code}/qr", func(w http.ResponseWriter, r *http.Request) {
		if s.limitRedirect(w, r) && s.limitRender(w, r, qrCost(r)) {
			s.handleQR(w, r)
		}
	}, http.MethodGet, http.MethodHead)
}

// qrCost is the render tokens a QR request takes: a PNG costs by its
// pixels (one token a 512-pixel square: a 2048-pixel one is 16, capped at
// the burst), an SVG (text the client draws) one. A request whose query
// is refused costs one.
func qrCost(r *http.Request) int {
	p, err := parseQRParams(r)
	if err != nil || !p.png {
		return 1
	}
	return (p.size*p.size + 512*512 - 1) / (512 * 512)
}

// qrParams are a QR code request's query.
type qrParams struct {
	png          bool
	size, margin int
}

func parseQRParams(r *http.Request) (qrParams, error) {
	q := r.URL.Query()
	p := qrParams{png: true, size: qrDefaultSize, margin: qrDefaultMargin}
	switch q.Get("format") {
	case "", "png":
	case "svg":
		p.png = false
	default:
		return p, field("format", "must be png or svg", link.ErrInvalidInput)
	}
	num := func(name string, lo, hi int, dst *int) error {
		v := q.Get(name)
		if v == "" {
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return field(name, fmt.Sprintf("must be %d to %d", lo, hi), link.ErrInvalidInput)
		}
		*dst = n
		return nil
	}
	if err := num("size", qrMinSize, qrMaxSize, &p.size); err != nil {
		return p, err
	}
	if err := num("margin", 0, qrMaxMargin, &p.margin); err != nil {
		return p, err
	}
	return p, nil
}

// handleQR serves GET /{code}/qr?format=png|svg&size=64..2048&margin=0..16:
// a QR code of the link's short URL. It is public and cacheable (the
// image depends on the short URL and the query alone, so its ETag does
// too); unknown codes answer 404, deleted ones 410.
func (s *Server) handleQR(w http.ResponseWriter, r *http.Request) {
	code, err := codeVar(r)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	p, err := parseQRParams(r)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	l, err := s.links.Resolve(r.Context(), code)
	if err == nil && l.Deleted {
		err = link.ErrDeleted
	}
	if err != nil {
		s.Error(w, r, err)
		return
	}
	content := s.publicURL + "/" + l.Code
	sum := sha256.Sum256(fmt.Appendf(nil, "qr1|%s|%t|%d|%d", content, p.png, p.size, p.margin))
	etag := `"` + hex.EncodeToString(sum[:12]) + `"`
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Cache-Control", "public, max-age=86400")
	if match := r.Header.Get("If-None-Match"); match != "" && etagMatches(match, etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	wait := time.NewTimer(s.qrWait)
	defer wait.Stop()
	select {
	case s.qrSlots <- struct{}{}:
		defer func() { <-s.qrSlots }()
	case <-r.Context().Done():
		return
	case <-wait.C:
		s.Error(w, r, fmt.Errorf("%w: too many QR codes being drawn; try again", link.ErrUnavailable))
		return
	}
	body, ctype, err := renderQR(content, p)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	h.Set("Content-Type", ctype)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// etagMatches reports whether an If-None-Match value names etag (or *).
func etagMatches(header, etag string) bool {
	for t := range strings.SplitSeq(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}

// renderQR draws content as a QR code (error correction level M): a PNG
// whose edge is the largest whole number of pixels per module that fits in
// p.size (at least one), or an SVG of p.size pixels drawn in module units.
func renderQR(content string, p qrParams) ([]byte, string, error) {
	qr, err := goqr.EncodeText(content, goqr.Medium)
	if err != nil {
		return nil, "", fmt.Errorf("qr: %w", err)
	}
	n := qr.Size() + 2*p.margin
	if !p.png {
		return qrSVG(qr, n, p), "image/svg+xml", nil
	}
	scale := max(1, p.size/n)
	img := image.NewPaletted(image.Rect(0, 0, n*scale, n*scale), color.Palette{color.White, color.Black})
	for y := range qr.Size() {
		for x := range qr.Size() {
			if !qr.Module(x, y) {
				continue
			}
			for py := (y + p.margin) * scale; py < (y+p.margin+1)*scale; py++ {
				row := img.Pix[py*img.Stride:]
				for px := (x + p.margin) * scale; px < (x+p.margin+1)*scale; px++ {
					row[px] = 1
				}
			}
		}
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&buf, img); err != nil {
		return nil, "", errors.Join(errors.New("qr: png"), err)
	}
	return buf.Bytes(), "image/png", nil
}

// qrSVG draws the code as one path of unit squares in a viewBox of n
// modules (the quiet zone included), p.size pixels wide.
func qrSVG(qr *goqr.QrCode, n int, p qrParams) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" shape-rendering="crispEdges">`, n, n, p.size, p.size)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/><path fill="#000" d="`, n, n)
	for y := range qr.Size() {
		for x := range qr.Size() {
			if qr.Module(x, y) {
				fmt.Fprintf(&b, "M%d,%dh1v1h-1z", x+p.margin, y+p.margin)
			}
		}
	}
	b.WriteString(`"/></svg>`)
	return b.Bytes()
}
