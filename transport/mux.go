// Package transport multiplexes every Raft group and the internal RPC of a
// node over one TCP port.
//
// Each connection starts with a small header: a magic byte, a version byte, a
// kind byte and the uvarint id of the group. The accepting side reads the
// header (with a deadline, in its own goroutine so a silent client cannot
// block the accept loop) and hands the connection to the listener registered
// for that kind and group. This is rqlite's tcp/mux.go pattern with a group id
// added; each Raft group still has its own raft.NetworkTransport on top.
package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Kind says what travels on a connection.
type Kind uint8

// Connection kinds.
const (
	// KindRaft carries one Raft group's transport.
	KindRaft Kind = 1
	// KindRPC carries the node's internal RPC.
	KindRPC Kind = 2
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
	// Logger receives accept and routing errors.
	Logger *slog.Logger
}

// Mux routes accepted connections to registered layers.
type Mux struct {
	ln            net.Listener
	advertise     string
	headerTimeout time.Duration
	backlog       int
	log           *slog.Logger

	mu      sync.Mutex
	layers  map[key]*Layer
	pending map[net.Conn]struct{} // accepted, header not yet read
	closed  bool
	wg      sync.WaitGroup
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
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Mux{
		ln: cfg.Listener, advertise: cfg.Advertise, headerTimeout: cfg.HeaderTimeout,
		backlog: cfg.Backlog, log: cfg.Logger, layers: make(map[key]*Layer), pending: make(map[net.Conn]struct{}),
	}, nil
}

// Addr returns the advertised address.
func (m *Mux) Addr() string { return m.advertise }

// Serve accepts connections until ctx is done or Close is called.
func (m *Mux) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { _ = m.Close() })
	defer stop()
	var delay time.Duration
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			m.mu.Lock()
			closed := m.closed
			m.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay) // back off on fd exhaustion, as net/http does
				continue
			}
			return err
		}
		delay = 0
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			_ = conn.Close()
			return nil
		}
		m.pending[conn] = struct{}{}
		m.wg.Add(1)
		m.mu.Unlock()
		go func() {
			defer m.wg.Done()
			m.route(conn)
		}()
	}
}

func (m *Mux) route(conn net.Conn) {
	_ = conn.SetReadDeadline(time.Now().Add(m.headerTimeout))
	k, err := readHeader(conn)
	m.mu.Lock()
	delete(m.pending, conn)
	m.mu.Unlock()
	if err != nil {
		m.log.Debug("peer connection without a valid header", "remote", conn.RemoteAddr(), "err", err)
		_ = conn.Close()
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	m.mu.Lock()
	l := m.layers[k]
	m.mu.Unlock()
	if l == nil {
		m.log.Debug("peer connection for an unknown group", "kind", k.kind, "group", k.group, "remote", conn.RemoteAddr())
		_ = conn.Close()
		return
	}
	if !l.deliver(conn) {
		m.log.Warn("peer connection dropped: layer closed or backlog full", "kind", k.kind, "group", k.group)
		_ = conn.Close()
	}
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
	return Dial(context.Background(), address, l.key.kind, l.key.group, timeout)
}

// Dial connects to the mux at address and sends the header for kind and
// group. The timeout bounds connecting and writing the header.
func Dial(ctx context.Context, address string, kind Kind, group uint64, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", address)
	if err != nil {
		return nil, err
	}
	if timeout > 0 {
		_ = conn.SetWriteDeadline(time.Now().Add(timeout))
	}
	if _, err := conn.Write(Header(kind, group)); err != nil {
		_ = conn.Close()
		return nil, err
	}
	_ = conn.SetWriteDeadline(time.Time{})
	return conn, nil
}

type advertised string

func (a advertised) Network() string { return "tcp" }
func (a advertised) String() string  { return string(a) }
