// Package connguard keeps an HTTP listener serving many clients when some
// of them open connections and hold them: a cap per client (an IPv4
// address, or an IPv6 /64, which one host holds whole), a cap in all with
// its last slots kept for health checks, and, under pressure, idle
// keep-alive connections closed early (as nginx and Envoy do), so that a
// flood of idle connections cannot hold every slot.
//
// A refused connection is answered (Config.Refuse: a 429 or 503 problem on
// plain HTTP) and closed at once, never left in the kernel's queue where
// every client would wait behind it; refusals are counted and logged at
// most once per LogEvery.
//
// Whether a connection is idle (between requests, or before its first) is
// told by the server that reads it: SetIdle on the *Conn, reached through
// Unwrap (net/http's ConnState hook, the redirect fast path's wait for a
// request). A new connection counts as idle until then.
package connguard

import (
	"bufio"
	"bytes"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linkraft/linkraft/internal/acceptloop"
	"github.com/linkraft/linkraft/internal/netid"
)

// Reason is why a connection was refused.
type Reason int

// Reasons for a refusal.
const (
	// PerClient: the client already holds Config.PerClient connections.
	PerClient Reason = iota
	// Full: every slot is taken, or every slot but the reserve and the
	// connection's first request is not a health check.
	Full
	numReasons
)

func (r Reason) String() string {
	switch r {
	case PerClient:
		return "per_client"
	case Full:
		return "full"
	}
	return "unknown"
}

// Config configures a Listener.
type Config struct {
	// Max bounds the connections open at once (required).
	Max int
	// PerClient bounds one client's connections (default Max/16, between
	// 64 and 256, at most Max/2).
	PerClient int
	// Exempt, if set, names the clients (a reverse proxy in front, which
	// speaks for many) that PerClient does not bound.
	Exempt func(netip.Addr) bool
	// Reserve is how many of Max only health checks may take (default
	// Max/100, at least 2 when Max allows).
	Reserve int
	// Health reports whether a request line (method, target) is a health
	// check the reserve is for (default: GET or HEAD of /healthz or
	// /readyz).
	Health func(method, target string) bool
	// PeekTimeout bounds the wait for the first request line of a
	// connection that would take a reserved slot (default 2 s).
	PeekTimeout time.Duration
	// PressureIdle is how long a connection may stay idle once the
	// listener is under pressure (three quarters of Max or more): longer
	// idle ones are closed (default 1 s).
	PressureIdle time.Duration
	// Refuse answers a refused connection before it is closed (nil: close
	// it at once). It runs on its own goroutine once the request head is
	// read, within a half-second deadline; at most 64 at a time (past
	// that, refused connections are closed unanswered).
	Refuse func(c net.Conn, r Reason)
	// Name names the listener in logs.
	Name string
	// Logger receives one line per LogEvery while refusals happen.
	Logger *slog.Logger
	// LogEvery bounds the refusal log lines (default 10 s).
	LogEvery time.Duration
}

// Stats are a listener's counters.
type Stats struct {
	// Open is the connections open now.
	Open int
	// Refused counts refusals by Reason.
	Refused [numReasons]uint64
	// IdleClosed counts idle connections closed under pressure.
	IdleClosed uint64
}

// Listener wraps a net.Listener with the guard.
type Listener struct {
	ln  net.Listener
	cfg Config

	conns chan net.Conn
	done  chan struct{}
	once  sync.Once

	mu        sync.Mutex
	open      map[*Conn]struct{}
	perClient map[netip.Prefix]int
	lastSweep time.Time

	answering  chan struct{} // refusals being answered (maxAnswering)
	refused    [numReasons]atomic.Uint64
	idleClosed atomic.Uint64
	logged     atomic.Int64 // unix ns of the last refusal log line
	logBase    [numReasons]atomic.Uint64
}

// New wraps ln. The returned Listener accepts on its own goroutine from
// now on.
func New(ln net.Listener, cfg Config) *Listener {
	if cfg.Max <= 0 {
		cfg.Max = 1024
	}
	if cfg.PerClient <= 0 {
		cfg.PerClient = max(min(max(cfg.Max/16, 64), 256, cfg.Max/2), 1)
	}
	if cfg.Reserve <= 0 {
		cfg.Reserve = max(cfg.Max/100, 2)
	}
	cfg.Reserve = min(cfg.Reserve, cfg.Max/2)
	if cfg.Health == nil {
		cfg.Health = IsHealthCheck
	}
	if cfg.PeekTimeout <= 0 {
		cfg.PeekTimeout = 2 * time.Second
	}
	if cfg.PressureIdle <= 0 {
		cfg.PressureIdle = time.Second
	}
	if cfg.LogEvery <= 0 {
		cfg.LogEvery = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	l := &Listener{ln: ln, cfg: cfg, conns: make(chan net.Conn), done: make(chan struct{}),
		open: map[*Conn]struct{}{}, perClient: map[netip.Prefix]int{}, answering: make(chan struct{}, maxAnswering)}
	go l.acceptLoop()
	return l
}

// IsHealthCheck reports whether a request line is a GET or HEAD of
// /healthz or /readyz (with or without a query).
func IsHealthCheck(method, target string) bool {
	if method != "GET" && method != "HEAD" {
		return false
	}
	for _, p := range [...]string{"/healthz", "/readyz"} {
		if target == p || len(target) > len(p) && target[:len(p)] == p && target[len(p)] == '?' {
			return true
		}
	}
	return false
}

// Accept returns the next admitted connection.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// ErrStopped is AcceptUntil's error when stop closed first.
var ErrStopped = errors.New("connguard: accept stopped")

// AcceptUntil is Accept that gives up with ErrStopped once stop is closed
// (the connection it would have returned is left for the next Accept).
func (l *Listener) AcceptUntil(stop <-chan struct{}) (net.Conn, error) {
	select {
	case <-stop:
		return nil, ErrStopped
	default:
	}
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-stop:
		return nil, ErrStopped
	}
}

// Close stops accepting. Connections already admitted stay open.
func (l *Listener) Close() error {
	err := net.ErrClosed
	l.once.Do(func() {
		close(l.done)
		err = l.ln.Close()
	})
	return err
}

// Config returns the listener's configuration, defaults filled in.
func (l *Listener) Config() Config { return l.cfg }

// Addr is the wrapped listener's address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Stats returns the listener's counters.
func (l *Listener) Stats() Stats {
	var s Stats
	l.mu.Lock()
	s.Open = len(l.open)
	l.mu.Unlock()
	for i := range s.Refused {
		s.Refused[i] = l.refused[i].Load()
	}
	s.IdleClosed = l.idleClosed.Load()
	return s
}

func (l *Listener) acceptLoop() {
	acceptloop.Run(l.ln, l.done, l.admit, func() { _ = l.Close() })
}

// admit decides on a new connection: admitted, refused, or (for the
// reserve) admitted once its first request line is a health check.
func (l *Listener) admit(raw net.Conn) {
	client, _ := netid.OfAddr(raw.RemoteAddr())
	exempt := l.cfg.Exempt != nil && l.cfg.Exempt(client.Addr())
	l.mu.Lock()
	if len(l.open) >= l.cfg.Max*3/4 {
		l.sweepLocked(time.Now())
	}
	switch {
	case !exempt && l.perClient[client] >= l.cfg.PerClient:
		l.mu.Unlock()
		l.refuse(raw, PerClient, false)
		return
	case len(l.open) >= l.cfg.Max:
		l.mu.Unlock()
		l.refuse(raw, Full, false)
		return
	}
	reserved := len(l.open) >= l.cfg.Max-l.cfg.Reserve
	c := &Conn{Conn: raw, l: l, client: client}
	c.idle.Store(true) // until its first request
	c.idleSince.Store(time.Now().UnixNano())
	l.open[c] = struct{}{}
	l.perClient[client]++
	l.mu.Unlock()
	if !reserved {
		l.hand(c)
		return
	}
	go l.peek(c)
}

// peek reads the first request line of a connection in a reserved slot:
// a health check is handed on (with the bytes read), anything else is
// refused.
func (l *Listener) peek(c *Conn) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(l.cfg.PeekTimeout))
	br := bufio.NewReaderSize(c.Conn, 512)
	line, err := br.ReadSlice('\n')
	_ = c.Conn.SetReadDeadline(time.Time{})
	fields := bytes.Fields(line)
	if err != nil || len(fields) != 3 || !l.cfg.Health(string(fields[0]), string(fields[1])) {
		c.release()
		l.refuse(c.Conn, Full, true) // its head is read, or late
		return
	}
	pending, _ := br.Peek(br.Buffered())
	c.pending = append(bytes.Clone(line), pending...)
	l.hand(c)
}

// hand gives c to Accept, or closes it if the listener closes first.
func (l *Listener) hand(c *Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

// sweepLocked closes the connections idle for longer than PressureIdle,
// at most every 100 ms (l.mu held).
func (l *Listener) sweepLocked(now time.Time) {
	if now.Sub(l.lastSweep) < 100*time.Millisecond {
		return
	}
	l.lastSweep = now
	cut := now.Add(-l.cfg.PressureIdle).UnixNano()
	for c := range l.open {
		if c.idle.Load() && c.idleSince.Load() < cut && c.closed.CompareAndSwap(false, true) {
			// The slot is free at once, for the connection being
			// admitted; the socket is closed off the lock.
			l.releaseLocked(c)
			l.idleClosed.Add(1)
			go c.Conn.Close()
		}
	}
}

// maxAnswering bounds the refused connections being answered at once:
// past it a refused connection is closed without an answer, so a flood
// of refusals holds no more descriptors than this.
const maxAnswering = 64

// refuse counts r, answers c and closes it. The answer comes after the
// request head (or half a second): a client reads an answer to its
// request, not one that came before it.
func (l *Listener) refuse(c net.Conn, r Reason, headRead bool) {
	l.refused[r].Add(1)
	l.logRefusals(c.RemoteAddr())
	if l.cfg.Refuse == nil {
		_ = c.Close()
		return
	}
	select {
	case l.answering <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
	go func() {
		defer func() { <-l.answering }()
		if !headRead {
			_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			readHead(c)
		}
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		l.cfg.Refuse(c, r)
		_ = c.Close()
	}()
}

// readHead reads from c up to the end of a request head, 4 KiB at most.
func readHead(c net.Conn) {
	var buf [4096]byte
	n := 0
	for n < len(buf) {
		k, err := c.Read(buf[n:])
		n += k
		if bytes.Contains(buf[max(n-k-3, 0):n], []byte("\r\n\r\n")) || err != nil {
			return
		}
	}
}

// logRefusals logs the refusals since the last line, at most once per
// LogEvery.
func (l *Listener) logRefusals(from net.Addr) {
	now := time.Now().UnixNano()
	last := l.logged.Load()
	if now-last < int64(l.cfg.LogEvery) || !l.logged.CompareAndSwap(last, now) {
		return
	}
	args := []any{"listener", l.cfg.Name, "last_from", from.String(), "max", l.cfg.Max, "per_client", l.cfg.PerClient}
	for r := range numReasons {
		n := l.refused[r].Load()
		args = append(args, "refused_"+r.String(), n-l.logBase[r].Swap(n))
	}
	l.cfg.Logger.Warn("connections refused (counted in linkraft_http_conns_refused_total)", args...)
}

// Conn is an admitted connection.
type Conn struct {
	net.Conn
	l       *Listener
	client  netip.Prefix
	pending []byte // read by peek, returned first

	idle      atomic.Bool
	idleSince atomic.Int64
	closed    atomic.Bool
}

// Read returns the bytes peek read first.
func (c *Conn) Read(p []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// SetIdle tells the guard whether the connection waits for a request (an
// idle one may be closed under pressure).
func (c *Conn) SetIdle(idle bool) {
	if idle && !c.idle.Load() {
		c.idleSince.Store(time.Now().UnixNano())
	}
	c.idle.Store(idle)
}

// Close closes the connection and frees its slot.
func (c *Conn) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return net.ErrClosed
	}
	c.release()
	return c.Conn.Close()
}

// CloseWrite half-closes, as net/http does after an error answer.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// release frees c's slot (once).
func (c *Conn) release() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	c.l.releaseLocked(c)
}

// releaseLocked frees c's slot if it holds one (l.mu held).
func (l *Listener) releaseLocked(c *Conn) {
	if _, ok := l.open[c]; !ok {
		return
	}
	delete(l.open, c)
	if l.perClient[c.client]--; l.perClient[c.client] <= 0 {
		delete(l.perClient, c.client)
	}
}

// SetIdle marks c idle or busy if it is (or wraps, through NetConn or
// Unwrap methods) a guarded *Conn; other connections are left alone.
func SetIdle(c net.Conn, idle bool) {
	for range 4 {
		switch v := c.(type) {
		case *Conn:
			v.SetIdle(idle)
			return
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return
		}
	}
}
