package webui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/linkraft/linkraft/httpapi"
)

// The UI reads and writes through the API, in-process: a request built
// here goes to the API's handler with the session's key in its context,
// the browser's address (and, from trusted proxies, the forwarded headers
// that name the client), and its answer comes back in memory.

// maxAnswerBytes bounds an API answer the UI reads whole (a listing page
// of 100 links with long URLs is well under it).
const maxAnswerBytes = 8 << 20

// problem is an API error answer.
type problem struct {
	httpapi.Problem
}

func (p *problem) Error() string {
	if p.Detail != "" {
		return p.Detail
	}
	return p.Title
}

// apiRequest builds an in-process request to the API acting as the
// session's key.
func apiRequest(r *http.Request, method, path string, body io.Reader) *http.Request {
	ctx := r.Context()
	if s := sessionOf(r); s != nil {
		ctx = httpapi.AsKey(ctx, s.key)
	}
	in, err := http.NewRequestWithContext(ctx, method, path, body)
	if err != nil {
		panic(err) // the UI builds every path itself
	}
	in.RemoteAddr = r.RemoteAddr
	in.TLS = r.TLS
	in.Host = r.Host
	for _, h := range []string{"Forwarded", "X-Forwarded-For", "User-Agent"} {
		if v := r.Header.Values(h); len(v) > 0 {
			in.Header[h] = v
		}
	}
	in.Header.Set("Accept", "application/json")
	if body != nil {
		in.Header.Set("Content-Type", "application/json")
	}
	return in
}

// call sends a JSON request (body nil: none) to h and decodes a success
// into out (nil: ignored); an error answer is returned as a *problem.
func call(h http.Handler, r *http.Request, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	rec := &recorder{answer: answer{header: http.Header{}}}
	h.ServeHTTP(rec, apiRequest(r, method, path, rd))
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if rec.overflow {
		return fmt.Errorf("webui: the answer to %s %s passed %d bytes", method, path, maxAnswerBytes)
	}
	if rec.status >= 400 {
		p := &problem{}
		if err := json.Unmarshal(rec.body.Bytes(), &p.Problem); err != nil || p.Status == 0 {
			p.Status, p.Title = rec.status, http.StatusText(rec.status)
		}
		return p
	}
	if out == nil || rec.status == http.StatusNoContent {
		return nil
	}
	return json.Unmarshal(rec.body.Bytes(), out)
}

// answer is the header and status half of an in-memory
// http.ResponseWriter.
type answer struct {
	header http.Header
	status int
}

func (w *answer) Header() http.Header { return w.header }

func (w *answer) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

// recorder is an in-memory http.ResponseWriter, bounded by maxAnswerBytes.
type recorder struct {
	answer
	body     bytes.Buffer
	overflow bool
}

func (w *recorder) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if w.body.Len()+len(b) > maxAnswerBytes {
		w.overflow = true
		return 0, io.ErrShortWrite
	}
	return w.body.Write(b)
}

// lineWriter is an http.ResponseWriter that hands each line of an NDJSON
// answer to fn as it arrives, keeping at most one line in memory.
type lineWriter struct {
	answer
	part []byte
	fn   func(line []byte)
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	n := len(b)
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(w.part)+len(b) > maxAnswerBytes {
				return 0, io.ErrShortWrite
			}
			w.part = append(w.part, b...)
			return n, nil
		}
		w.part = append(w.part, b[:i]...)
		if len(strings.TrimSpace(string(w.part))) > 0 {
			w.fn(w.part)
		}
		w.part, b = w.part[:0], b[i+1:]
	}
}

// Flush lets the API's streaming writers flush through.
func (w *lineWriter) Flush() {}
