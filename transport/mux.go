// Package transport multiplexes every Raft group and the internal RPC of a
// node over one TCP port.
//
// With TLS configured (the default in linknode), every connection is mutual
// TLS 1.3 first: the handshake, under a deadline and in its own goroutine,
// proves the peer a member before a byte of it is routed. Inside, each
// connection starts with a small header: a magic byte, a version byte, a
// kind byte and the uvarint id of the group. The accepting side reads the
// header and hands the connection to the listener registered for that kind
// and group. This is rqlite's tcp/mux.go pattern with a group id added;
// each Raft group still has its own raft.NetworkTransport on top.
//
// Connections that have not yet finished the handshake and header are
// limited in total and per source address, so a flood of strangers cannot
// take the file descriptors the members need; the accept loop backs off on
// every error and stops only when the mux closes.
package transport

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/linkraft/linkraft/internal/netid"
)

// Kind says what travels on a connection.
type Kind uint8

// Connection kinds.
const (
	// KindRaft carries one Raft group's transport.
	KindRaft Kind = 1
	// KindRPC carries the internal RPC of the versions before the peer
	// protocol (JSON), kept for rolling upgrades from them.
	KindRPC Kind = 2
	// KindPeer carries the peer protocol (package peer).
	KindPeer Kind = 3
)

const (
	magic   = 0x4c // 'L'
	version = 1
	// maxHeader is magic + version + kind + a 10-byte uvarint.
	maxHeader = 13
)

var (
	// ErrClosed is returned by Accept and Dial after the mux or the layer is
	// closed.
	ErrClosed = errors.New("transport: closed")
	// ErrRegistered is returned when a kind and group are registered twice.
	ErrRegistered = errors.New("transport: already registered")
)

// Config configures a Mux.
type Config struct {
	// Listener is the bound peer listener; the Mux owns it from now on.
	Listener net.Listener
	// Advertise is the host:port peers dial; defaults to the listener's
	// address.
	Advertise string
	// HeaderTimeout bounds how long an accepted connection may take to send
	// its header (default 5 s).
	HeaderTimeout time.Duration
	// Backlog is how many accepted connections may wait per layer before the
	// mux drops new ones (default 64).
	Backlog int
	// ServerTLS, if set, makes every accepted connection a TLS server
	// connection (linknode: mutual TLS 1.3, internal/peertls); ClientTLS
	// is what Dial uses. Set both or neither.
	ServerTLS, ClientTLS *tls.Config
	// MaxPending bounds connections still in their handshake or header,
	// in total (default 1024) and per source (MaxPendingPerSource: an IPv4
	// address, or an IPv6 /64, which one host can fill with addresses;
	// default 256: a member opening RPC connections in a burst, each in a
	// TLS handshake, must not hit it). Over either, a new connection is
	// closed at once.
	MaxPending, MaxPendingPerSource int
	// MaxConns bounds the routed connections open at once (default 8192).
	MaxConns int
	// Logger receives accept and routing errors.
	Logger *slog.Logger
}

// Mux routes accepted connections to registered layers.
type Mux struct {
	ln            net.Listener
	advertise     string
	headerTimeout time.Duration
	backlog       int
	serverTLS     *tls.Config
	clientTLS     *tls.Config
	maxPending    int
	maxPerSource  int
	maxConns      int
	log           *slog.Logger

	mu        sync.Mutex
	layers    map[key]*Layer
	pending   map[net.Conn]struct{} // accepted, header not yet read
	perSource map[string]int        // pending connections per source IP
	open      int                   // routed connections not yet closed
	refused   uint64                // connections closed by the limits
	// known are the sources (as sourceIP) that completed a handshake and
	// header here: members, let in first when strangers fill the pending
	// slots (at most maxKnown, the oldest forgotten first).
	known    map[string]uint64
	knownSeq uint64
	loggedAt time.Time // last refusal log line
	loggedN  uint64    // refused as of that line
	closed   bool
	wg       sync.WaitGroup
}

type key struct {
	kind  Kind
	group uint64
}

// New returns a Mux over cfg.Listener. Call Serve to start accepting.
func New(cfg Config) (*Mux, error) {
	if cfg.Listener == nil {
		return nil, errors.New("transport: Config.Listener is required")
	}
	if cfg.Advertise == "" {
		cfg.Advertise = cfg.Listener.Addr().String()
	}
	if _, _, err := net.SplitHostPort(cfg.Advertise); err != nil {
		return nil, fmt.Errorf("transport: advertise address %q: %w", cfg.Advertise, err)
	}
	if cfg.HeaderTimeout <= 0 {
		cfg.HeaderTimeout = 5 * time.Second
	}
	if cfg.Backlog <= 0 {
		cfg.Backlog = 64
	}
	if (cfg.ServerTLS == nil) != (cfg.ClientTLS == nil) {
		return nil, errors.New("transport: set both ServerTLS and ClientTLS, or neither")
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = 1024
	}
	if cfg.MaxPendingPerSource <= 0 {
		cfg.MaxPendingPerSource = 256
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 8192
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Mux{
		ln: cfg.Listener, advertise: cfg.Advertise, headerTimeout: cfg.HeaderTimeout,
		backlog: cfg.Backlog, serverTLS: cfg.ServerTLS, clientTLS: cfg.ClientTLS,
		maxPending: cfg.MaxPending, maxPerSource: cfg.MaxPendingPerSource, maxConns: cfg.MaxConns,
		log: cfg.Logger, layers: make(map[key]*Layer), pending: make(map[net.Conn]struct{}), perSource: make(map[string]int), known: make(map[string]uint64),
	}, nil
}

// Refused returns how many connections the limits have closed.
func (m *Mux) Refused() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refused
}

// Open returns the routed connections open now.
func (m *Mux) Open() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.open
}

// Addr returns the advertised address.
func (m *Mux) Addr() string { return m.advertise }

// Serve accepts connections until ctx is done or Close is called. It backs
// off on every accept error (file descriptors exhausted, above all) and
// returns only once the mux is closed.
func (m *Mux) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { _ = m.Close() })
	defer stop()
	var delay time.Duration
	var lastLog time.Time
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			m.mu.Lock()
			closed := m.closed
			m.mu.Unlock()
			if closed {
				return nil
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			if time.Since(lastLog) > 10*time.Second {
				m.log.Warn("peer port accept failed; backing off", "err", err, "delay", delay)
				lastLog = time.Now()
			}
			select {
			case <-time.After(delay): // as net/http does on EMFILE
			case <-ctx.Done():
			}
			continue
		}
		delay = 0
		source := sourceIP(conn.RemoteAddr())
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			_ = conn.Close()
			return nil
		}
		if !m.admitLocked(source) {
			m.refused++
			m.logRefusalsLocked(conn.RemoteAddr())
			m.mu.Unlock()
			_ = conn.Close()
			continue
		}
		m.pending[conn] = struct{}{}
		m.perSource[source]++
		m.wg.Add(1)
		m.mu.Unlock()
		go func() {
			defer m.wg.Done()
			m.route(conn, source)
		}()
	}
}

// memberReserve is how many pending slots past the caps (in all, and per
// source) a source that completed a handshake before may take: a member
// reconnecting while strangers hold every pending slot gets in.
const memberReserve = 64

// maxKnown bounds the sources remembered as members.
const maxKnown = 4096

// admitLocked decides on a new connection from source (m.mu held).
func (m *Mux) admitLocked(source string) bool {
	if m.open >= m.maxConns {
		return false
	}
	if len(m.pending) < m.maxPending && m.perSource[source] < m.maxPerSource {
		return true
	}
	_, known := m.known[source]
	return known && len(m.pending) < m.maxPending+memberReserve && m.perSource[source] < m.maxPerSource+memberReserve
}

// rememberLocked records that source completed a handshake (m.mu held).
func (m *Mux) rememberLocked(source string) {
	if _, ok := m.known[source]; !ok && len(m.known) >= maxKnown {
		oldest, at := "", uint64(0)
		for s, seq := range m.known {
			if oldest == "" || seq < at {
				oldest, at = s, seq
			}
		}
		delete(m.known, oldest)
	}
	m.knownSeq++
	m.known[source] = m.knownSeq
}

// logRefusalsLocked logs the refusals at most every 10 s (m.mu held).
func (m *Mux) logRefusalsLocked(from net.Addr) {
	if time.Since(m.loggedAt) < 10*time.Second {
		return
	}
	m.log.Warn("peer connections refused: too many pending handshakes (counted in linkraft_peer_conns_refused_total)",
		"refused", m.refused-m.loggedN, "last_from", from.String(), "pending", len(m.pending),
		"max_pending", m.maxPending, "max_pending_per_source", m.maxPerSource)
	m.loggedAt, m.loggedN = time.Now(), m.refused
}

// sourceIP is the pending-connection identity of a peer address: an IPv4
// address as is, an IPv6 address by its /64 (internal/netid), anything
// else by its string.
func sourceIP(a net.Addr) string {
	if p, ok := netid.OfAddr(a); ok {
		return netid.Key(p)
	}
	return a.String()
}

func (m *Mux) route(raw net.Conn, source string) {
	_ = raw.SetDeadline(time.Now().Add(m.headerTimeout))
	var conn net.Conn = raw
	var err error
	if m.serverTLS != nil {
		tc := tls.Server(raw, m.serverTLS)
		ctx, cancel := context.WithTimeout(context.Background(), m.headerTimeout)
		err = tc.HandshakeContext(ctx)
		cancel()
		conn = tc
	}
	var k key
	if err == nil {
		k, err = readHeader(conn)
	}
	m.mu.Lock()
	delete(m.pending, raw)
	if m.perSource[source]--; m.perSource[source] <= 0 {
		delete(m.perSource, source)
	}
	m.mu.Unlock()
	if err != nil {
		m.log.Debug("peer connection refused: no handshake or header", "remote", raw.RemoteAddr(), "err", err)
		_ = raw.Close()
		return
	}
	_ = raw.SetDeadline(time.Time{})
	m.mu.Lock()
	m.rememberLocked(source)
	l := m.layers[k]
	m.open++
	m.mu.Unlock()
	if l == nil {
		m.log.Debug("peer connection for an unknown group", "kind", k.kind, "group", k.group, "remote", raw.RemoteAddr())
		m.release()
		_ = raw.Close()
		return
	}
	if !l.deliver(m.track(conn)) {
		m.log.Warn("peer connection dropped: layer closed or backlog full", "kind", k.kind, "group", k.group)
		m.release()
		_ = raw.Close()
	}
}

func (m *Mux) release() {
	m.mu.Lock()
	m.open--
	m.mu.Unlock()
}

// track returns conn with a Close that releases its slot once.
func (m *Mux) track(conn net.Conn) net.Conn {
	t := &trackedConn{Conn: conn}
	t.release = m.release
	return t
}

// trackedConn counts a routed connection until it is closed.
type trackedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (t *trackedConn) Close() error {
	t.once.Do(t.release)
	return t.Conn.Close()
}

// PeerConn returns the connection under a routed connection's tracking
// wrapper: the *tls.Conn whose certificate names the peer, when TLS is on.
func PeerConn(c net.Conn) net.Conn {
	if t, ok := c.(*trackedConn); ok {
		return t.Conn
	}
	return c
}

func readHeader(r io.Reader) (key, error) {
	var b [3]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return key{}, err
	}
	if b[0] != magic || b[1] != version {
		return key{}, fmt.Errorf("bad magic or version %x %x", b[0], b[1])
	}
	g, err := binary.ReadUvarint(byteReader{r})
	if err != nil {
		return key{}, err
	}
	return key{kind: Kind(b[2]), group: g}, nil
}

type byteReader struct{ io.Reader }

func (b byteReader) ReadByte() (byte, error) {
	var one [1]byte
	_, err := io.ReadFull(b.Reader, one[:])
	return one[0], err
}

// Header returns the bytes that open a connection of kind to group.
func Header(kind Kind, group uint64) []byte {
	b := make([]byte, 3, maxHeader)
	b[0], b[1], b[2] = magic, version, byte(kind)
	return binary.AppendUvarint(b, group)
}

// Close stops accepting, closes every layer and waits for routing
// goroutines.
func (m *Mux) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	layers := make([]*Layer, 0, len(m.layers))
	for _, l := range m.layers {
		layers = append(layers, l)
	}
	// Connections still sending their header would hold Close up for the
	// header timeout.
	for c := range m.pending {
		_ = c.Close()
	}
	m.mu.Unlock()
	err := m.ln.Close()
	for _, l := range layers {
		_ = l.Close()
	}
	m.wg.Wait()
	return err
}

// Layer registers kind and group and returns their listener. It implements
// raft.StreamLayer (Accept, Close, Addr, Dial).
func (m *Mux) Layer(kind Kind, group uint64) (*Layer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	k := key{kind, group}
	if _, ok := m.layers[k]; ok {
		return nil, fmt.Errorf("%w: kind %d group %d", ErrRegistered, kind, group)
	}
	l := &Layer{mux: m, key: k, ch: make(chan net.Conn, m.backlog), done: make(chan struct{})}
	m.layers[k] = l
	return l, nil
}

// Layer is the listener of one kind and group, and its dialer.
type Layer struct {
	mux  *Mux
	key  key
	ch   chan net.Conn
	done chan struct{}
	once sync.Once

	mu     sync.Mutex // orders deliver against Close's drain
	closed bool
}

// deliver queues conn for Accept; false if the layer is closed or its
// backlog is full.
func (l *Layer) deliver(conn net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	select {
	case l.ch <- conn:
		return true
	default:
		return false
	}
}

// Accept returns the next connection routed to this layer.
func (l *Layer) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, ErrClosed
	}
}

// Close unregisters the layer; pending connections are closed.
func (l *Layer) Close() error {
	l.once.Do(func() {
		l.mux.mu.Lock()
		if l.mux.layers[l.key] == l {
			delete(l.mux.layers, l.key)
		}
		l.mux.mu.Unlock()
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		close(l.done)
		for {
			select {
			case c := <-l.ch:
				_ = c.Close()
			default:
				return
			}
		}
	})
	return nil
}

// Addr returns the mux's advertised address.
func (l *Layer) Addr() net.Addr { return advertised(l.mux.advertise) }

// Dial connects to the mux at address and opens this layer's kind and group
// there.
func (l *Layer) Dial(address string, timeout time.Duration) (net.Conn, error) {
	return l.mux.Dial(context.Background(), address, l.key.kind, l.key.group, timeout)
}

// Dial connects to the mux at address (with this mux's client TLS, if any)
// and sends the header for kind and group. The timeout bounds connecting,
// the handshake and writing the header.
func (m *Mux) Dial(ctx context.Context, address string, kind Kind, group uint64, timeout time.Duration) (net.Conn, error) {
	return Dial(ctx, address, kind, group, timeout, m.clientTLS)
}

// Dial connects to a mux at address, over TLS when tlsConf is set, and
// sends the header for kind and group. The timeout bounds connecting, the
// handshake and writing the header.
func Dial(ctx context.Context, address string, kind Kind, group uint64, timeout time.Duration, tlsConf *tls.Config) (net.Conn, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", address)
	if err != nil {
		return nil, err
	}
	conn := raw
	if dl, ok := ctx.Deadline(); ok {
		_ = raw.SetDeadline(dl)
	}
	if tlsConf != nil {
		tc := tls.Client(raw, tlsConf)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = raw.Close()
			return nil, fmt.Errorf("peer TLS handshake with %s: %w", address, err)
		}
		conn = tc
	}
	if _, err := conn.Write(Header(kind, group)); err != nil {
		_ = raw.Close()
		return nil, err
	}
	_ = raw.SetDeadline(time.Time{})
	return conn, nil
}

type advertised string

func (a advertised) Network() string { return "tcp" }
func (a advertised) String() string  { return string(a) }
