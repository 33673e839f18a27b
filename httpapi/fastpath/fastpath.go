// Package fastpath answers the common redirect on a plain HTTP/1.1
// connection without net/http. net/http spends most of a redirect's CPU on
// machinery a redirect does not need (a *http.Request with header maps, a
// response writer, buffered writers per connection), which caps a Go
// server at about half of what nginx does with the same codes
// (BENCHMARKS.md).
//
// A Listener wraps the public listener. It reads each request head itself:
// a plain GET or HEAD of /{segment} is offered to its Handler, which
// answers with a redirect or declines. Anything else — another method or
// path, a header it does not handle, a declined request, a head it cannot
// parse — is handed, with every byte of the connection not yet consumed,
// to the http.Server that Accepts from the Listener, which serves that
// connection from then on. The fast path therefore never answers with an
// error of its own: every answer it does not give is net/http's, and a
// differential fuzz target (httpapi's FuzzFastPathMatchesNetHTTP) requires
// the answers it does give to match net/http's byte for byte where it
// matters.
package fastpath

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linkraft/linkraft/internal/acceptloop"
)

// Answer is a redirect the fast path writes.
type Answer struct {
	// Status is a 3xx redirect status.
	Status int
	// Location is the destination; one holding control bytes is declined.
	Location string
	// CacheControl, if set, is sent as Cache-Control.
	CacheControl string
	// ID names what was answered, for the Handler's own use in Served
	// (the fast path does not read it).
	ID string
}

// Handler decides the fast path's answers. Both methods run on the
// connection's goroutine; the Request's byte slices are views of the
// connection's read buffer, valid only during the call.
type Handler interface {
	// Redirect returns the answer to r, or false to leave r (and the rest
	// of its connection) to net/http. It must not have written anything or
	// changed any state when it declines.
	Redirect(r *Request) (Answer, bool)
	// Served is called once the answer to r is written to the connection's
	// buffer; start is when Redirect was called.
	Served(r *Request, a Answer, start time.Time)
}

// Options holds a Listener's timeouts, as an http.Server's.
type Options struct {
	// ReadHeaderTimeout bounds the reading of a request head (default 10 s).
	ReadHeaderTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a connection
	// (default 120 s).
	IdleTimeout time.Duration
	// WriteTimeout bounds the writing of a response (default 30 s).
	WriteTimeout time.Duration
	// Logger receives panics of the fast path (the connection is closed).
	Logger interface {
		Error(msg string, args ...any)
	}
}

// bufSize is the read buffer per connection: a request head longer
// than this goes to net/http.
const bufSize = 4096

// Listener serves redirects on the connections of a listener and hands
// every other connection to the http.Server that Accepts from it.
type Listener struct {
	ln   net.Listener
	h    Handler
	cfg  Options
	date dateCache

	handoff chan net.Conn
	done    chan struct{} // closed by Close
	once    sync.Once

	mu     sync.Mutex
	conns  map[*fastConn]struct{}
	active sync.WaitGroup // connections still served by the fast path

	served, handed atomic.Uint64
}

// Stats reports how many requests the fast path answered and how many
// connections it handed to net/http.
func (l *Listener) Stats() (served, handed uint64) { return l.served.Load(), l.handed.Load() }

// New wraps ln with a fast path answered by h. Serve the returned listener
// with the http.Server that answers everything else; call Shutdown after
// the server's own.
func New(ln net.Listener, h Handler, cfg Options) *Listener {
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = 10 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 120 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	l := &Listener{ln: ln, h: h, cfg: cfg, handoff: make(chan net.Conn), done: make(chan struct{}),
		conns: map[*fastConn]struct{}{}}
	go l.acceptLoop()
	return l
}

// Accept returns the next connection handed over to net/http.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.handoff:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Addr is the wrapped listener's address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Close stops accepting and closes the connections the fast path holds
// between requests. Connections in the middle of a request finish it.
func (l *Listener) Close() error {
	var err error
	l.once.Do(func() {
		// Under mu: acceptLoop checks done and counts a connection in
		// active under mu, so no connection is counted once Shutdown may
		// be waiting.
		l.mu.Lock()
		close(l.done)
		for c := range l.conns {
			if c.idle.Load() {
				c.Close()
			}
		}
		l.mu.Unlock()
		err = l.ln.Close()
	})
	return err
}

// Shutdown closes the listener and waits until no connection is being
// served by the fast path any more, or ctx ends.
func (l *Listener) Shutdown(ctx context.Context) error {
	err := l.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	waited := make(chan struct{})
	go func() { l.active.Wait(); close(waited) }()
	select {
	case <-waited:
		return err
	case <-ctx.Done():
		l.mu.Lock()
		for c := range l.conns {
			c.Close()
		}
		l.mu.Unlock()
		return ctx.Err()
	}
}

func (l *Listener) acceptLoop() {
	acceptloop.Run(l.ln, l.done, l.accepted, func() { _ = l.Close() })
}

// accepted serves c on the fast path, or closes it if the listener has
// closed.
func (l *Listener) accepted(c net.Conn) {
	fc := &fastConn{Conn: c}
	fc.below, _ = c.(interface{ SetIdle(bool) }) // looked up once, not per request
	l.mu.Lock()
	select {
	case <-l.done:
		l.mu.Unlock()
		c.Close()
		return
	default:
	}
	l.conns[fc] = struct{}{}
	l.active.Add(1)
	l.mu.Unlock()
	go l.serve(fc)
}

// fastConn is a connection served by the fast path.
type fastConn struct {
	net.Conn
	idle atomic.Bool // waiting for a request: Close may close it
	// below is the listener's connection when it keeps count of idle
	// ones (a connection guard), else nil.
	below interface{ SetIdle(bool) }
}

// setIdle records whether c waits for a request, and tells the listener
// below when it keeps count (a connection guard closes idle connections
// under pressure).
func (c *fastConn) setIdle(idle bool) {
	c.idle.Store(idle)
	if c.below != nil {
		c.below.SetIdle(idle)
	}
}

// handedConn is a connection handed to net/http: its reads return the
// bytes the fast path had read but not consumed first.
type handedConn struct {
	net.Conn
	pending []byte
}

// NetConn returns the connection below, as *tls.Conn's does.
func (c *handedConn) NetConn() net.Conn { return c.Conn }

// CloseWrite lets net/http half-close after an error answer, as it does on
// its own connections.
func (c *handedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *handedConn) Read(p []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, bufSize) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, bufSize) }}
)

// serve answers requests on c until one is not for the fast path (then
// the connection goes to net/http) or the connection ends.
func (l *Listener) serve(c *fastConn) {
	br := readers.Get().(*bufio.Reader)
	bw := writers.Get().(*bufio.Writer)
	br.Reset(c)
	bw.Reset(c)
	handed := false
	defer func() {
		if p := recover(); p != nil {
			if l.cfg.Logger != nil {
				l.cfg.Logger.Error("panic in the redirect fast path", "remote", c.RemoteAddr().String(), "panic", p)
			}
			handed = false
		}
		l.mu.Lock()
		delete(l.conns, c)
		l.mu.Unlock()
		if !handed {
			c.Close()
		}
		br.Reset(nil)
		bw.Reset(nil)
		readers.Put(br)
		writers.Put(bw)
		l.active.Done()
	}()
	var req Request
	// The first request must come within ReadHeaderTimeout, as with
	// net/http; later ones within IdleTimeout.
	wait := l.cfg.ReadHeaderTimeout
	for {
		if br.Buffered() == 0 {
			c.setIdle(true)
			select {
			case <-l.done: // closed while this connection was busy
				return
			default:
			}
			_ = c.SetReadDeadline(time.Now().Add(wait))
			wait = l.cfg.IdleTimeout
			_, err := br.Peek(1)
			c.setIdle(false)
			if err != nil {
				return
			}
		}
		_ = c.SetReadDeadline(time.Now().Add(l.cfg.ReadHeaderTimeout))
		n, ok := readHead(br)
		if n < 0 {
			return // the connection ended or timed out within a head
		}
		if ok {
			head, _ := br.Peek(n)
			ok = parseHead(head, &req)
		}
		if ok {
			_ = c.SetWriteDeadline(time.Now().Add(l.cfg.WriteTimeout))
			ok = l.redirect(bw, c, &req)
		}
		if !ok {
			if bw.Buffered() > 0 && bw.Flush() != nil {
				return
			}
			handed = l.handOff(c, br)
			return
		}
		_, _ = br.Discard(n)
		if req.close || br.Buffered() == 0 {
			if bw.Flush() != nil || req.close {
				return
			}
		}
	}
}

// handOff gives c, with what br holds, to net/http.
func (l *Listener) handOff(c *fastConn, br *bufio.Reader) bool {
	_ = c.SetDeadline(time.Time{})
	pending, _ := br.Peek(br.Buffered())
	hc := &handedConn{Conn: c.Conn, pending: bytes.Clone(pending)}
	// Counted before the handoff: once net/http has the connection it may
	// answer before this goroutine runs again, and a reader of Stats that
	// saw the answer must see the count.
	l.handed.Add(1)
	select {
	case l.handoff <- hc:
		return true
	case <-l.done:
		l.handed.Add(^uint64(0))
		return false
	}
}

// readHead waits until br holds a whole request head and returns its
// length. ok is false for a head the fast path does not read (longer than
// the buffer, or lines not ended by CRLF); n < 0 if the connection failed.
func readHead(br *bufio.Reader) (n int, ok bool) {
	from := 0
	for {
		b, _ := br.Peek(br.Buffered())
		for i := from; i < len(b); i++ {
			if b[i] != '\n' {
				continue
			}
			if i == 0 || b[i-1] != '\r' {
				return 0, false // a bare LF: net/http's reading of it applies
			}
			if i >= 3 && b[i-2] == '\n' && b[i-3] == '\r' {
				return i + 1, true
			}
		}
		from = len(b)
		if len(b) == br.Size() {
			return 0, false
		}
		if _, err := br.Peek(len(b) + 1); err != nil {
			if len(b) > 0 && !isTimeout(err) {
				return 0, false // let net/http answer a truncated head
			}
			return -1, false
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Request is what the fast path reads from a request head. The byte
// slices point into the connection's read buffer.
type Request struct {
	// Conn is the connection the request came on.
	Conn net.Conn
	// Head is set for HEAD, clear for GET.
	Head bool
	// Segment is the path's one segment, without the leading slash.
	Segment []byte
	// Query is the target's raw query, after '?' (empty without one).
	Query     []byte
	UserAgent []byte
	Referer   []byte
	// AcceptLanguage is the first Accept-Language header's value (as
	// net/http's Header.Get).
	AcceptLanguage []byte
	// Forwarded and XForwardedFor are those headers' values (non-nil, if
	// empty, when the header is there); a request with more than one of
	// them goes to net/http.
	Forwarded, XForwardedFor []byte
	// Private is set for DNT: 1 or Sec-GPC: 1.
	Private bool

	close         bool // answer with Connection: close and close
	keepAlive10   bool // HTTP/1.0 with Connection: keep-alive
	http10        bool
	hosts         int
	connectionHdr bool
}

// parseHead reads a request head (ending in CRLF CRLF). It reports false
// for anything the fast path leaves to net/http: any method but GET and
// HEAD, a target that is not /{code} (an optional query aside), a version
// but HTTP/1.0 and 1.1, a body, Expect, Upgrade, a malformed or folded
// header line, or a Host header net/http would refuse.
func parseHead(head []byte, r *Request) bool {
	*r = Request{}
	forwards := 0
	line, rest, _ := bytes.Cut(head, crlf)
	method, line, ok1 := bytes.Cut(line, sp)
	target, proto, ok2 := bytes.Cut(line, sp)
	if !ok1 || !ok2 {
		return false
	}
	switch string(method) {
	case http.MethodGet:
	case http.MethodHead:
		r.Head = true
	default:
		return false
	}
	switch string(proto) {
	case "HTTP/1.1":
	case "HTTP/1.0":
		r.http10 = true
	default:
		return false
	}
	path := target
	if i := bytes.IndexByte(target, '?'); i >= 0 {
		path, r.Query = target[:i], target[i+1:]
		for _, c := range r.Query {
			if c <= ' ' || c == 0x7f || c == '#' {
				return false
			}
		}
	}
	if len(path) < 2 || path[0] != '/' || !validSegment(path[1:]) {
		return false
	}
	r.Segment = path[1:]
	for len(rest) > 2 { // the final CRLF is the end of the head
		var hl []byte
		hl, rest, _ = bytes.Cut(rest, crlf)
		colon := bytes.IndexByte(hl, ':')
		if colon <= 0 || !validToken(hl[:colon]) {
			return false // also catches folded lines (leading space or tab)
		}
		name, value := hl[:colon], bytes.Trim(hl[colon+1:], " \t")
		for _, c := range value {
			if (c < ' ' && c != '\t') || c == 0x7f {
				return false
			}
		}
		switch {
		case asciiEqualFold(name, "host"):
			r.hosts++
			if !validHost(value) {
				return false
			}
		case asciiEqualFold(name, "user-agent"):
			if r.UserAgent == nil { // the first, as net/http's UserAgent()
				r.UserAgent = nonNil(value)
			}
		case asciiEqualFold(name, "referer"):
			r.Referer = value
		case asciiEqualFold(name, "accept-language"):
			if r.AcceptLanguage == nil {
				r.AcceptLanguage = nonNil(value)
			}
		case asciiEqualFold(name, "forwarded"):
			r.Forwarded = nonNil(value)
			forwards++
		case asciiEqualFold(name, "x-forwarded-for"):
			r.XForwardedFor = nonNil(value)
			forwards++
		case asciiEqualFold(name, "dnt"), asciiEqualFold(name, "sec-gpc"):
			if string(value) == "1" {
				r.Private = true
			}
		case asciiEqualFold(name, "connection"):
			if r.connectionHdr {
				return false
			}
			r.connectionHdr = true
			switch {
			case asciiEqualFold(value, "close"):
				r.close = true
			case asciiEqualFold(value, "keep-alive"):
				r.keepAlive10 = r.http10
			default:
				return false
			}
		case asciiEqualFold(name, "content-length"), asciiEqualFold(name, "transfer-encoding"),
			asciiEqualFold(name, "expect"), asciiEqualFold(name, "upgrade"), asciiEqualFold(name, "trailer"):
			return false
		}
	}
	if r.hosts > 1 || (r.hosts == 0 && !r.http10) {
		return false // net/http answers 400
	}
	if forwards > 1 {
		return false // net/http joins repeated fields; it decides
	}
	if r.http10 && !r.keepAlive10 {
		r.close = true
	}
	return true
}

var (
	crlf = []byte("\r\n")
	sp   = []byte(" ")
)

// nonNil returns b, or an empty non-nil slice for nil.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// validSegment accepts a path segment of URL-safe characters that needs no
// unescaping; the Handler decides whether it names anything.
func validSegment(b []byte) bool {
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~') {
			return false
		}
	}
	return true
}

// validToken reports whether b is an RFC 9110 token (a header name).
func validToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), c) >= 0) {
			return false
		}
	}
	return true
}

// validHost accepts the host names and addresses a browser sends: letters,
// digits, '.', '-', '_', ':' and brackets; anything else goes to net/http,
// which decides.
func validHost(b []byte) bool {
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' || c == ':' || c == '[' || c == ']') {
			return false
		}
	}
	return true
}

func asciiEqualFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// redirect answers r if the Handler has an answer for it. It reports
// false, having written nothing, otherwise.
func (l *Listener) redirect(bw *bufio.Writer, c net.Conn, r *Request) bool {
	start := time.Now()
	r.Conn = c
	a, ok := l.h.Redirect(r)
	if !ok || !headerSafe(a.Location) || !headerSafe(a.CacheControl) || a.Status < 300 || a.Status > 399 {
		return false
	}
	// As net/http writes it: the status line in the request's version, the
	// handler's headers in key order, then Date, Content-Length (not for
	// HEAD) and Connection.
	if r.http10 {
		bw.WriteString("HTTP/1.0 ")
	} else {
		bw.WriteString("HTTP/1.1 ")
	}
	bw.WriteString(strconv.Itoa(a.Status))
	bw.WriteByte(' ')
	bw.WriteString(http.StatusText(a.Status))
	if a.CacheControl != "" {
		bw.WriteString("\r\nCache-Control: ")
		bw.WriteString(a.CacheControl)
	}
	bw.WriteString("\r\nLocation: ")
	bw.WriteString(a.Location)
	bw.WriteString("\r\nX-Content-Type-Options: nosniff\r\nDate: ")
	bw.WriteString(l.date.get(start))
	if !r.Head {
		bw.WriteString("\r\nContent-Length: 0")
	}
	switch {
	case r.close && !r.http10:
		bw.WriteString("\r\nConnection: close")
	case r.keepAlive10:
		bw.WriteString("\r\nConnection: keep-alive")
	}
	bw.WriteString("\r\n\r\n")
	l.h.Served(r, a, start)
	l.served.Add(1)
	return true
}

// headerSafe reports whether v can be written as a header value as is.
// Stored URLs never hold control bytes (link.URLPolicy refuses them); this
// keeps a response from being split if one ever did (net/http, which then
// answers, replaces them).
func headerSafe(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// dateCache is the Date header value, formatted once a second.
type dateCache struct {
	v atomic.Pointer[cachedDate]
}

type cachedDate struct {
	sec int64
	s   string
}

func (d *dateCache) get(now time.Time) string {
	sec := now.Unix()
	if c := d.v.Load(); c != nil && c.sec == sec {
		return c.s
	}
	c := &cachedDate{sec: sec, s: now.UTC().Format(http.TimeFormat)}
	d.v.Store(c)
	return c.s
}
