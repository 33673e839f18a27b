package peer

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/linkraft/linkraft/link"
)

// Server timeouts.
const (
	// IdleTimeout closes a connection that sends no request for this long.
	IdleTimeout = 2 * time.Minute
	// defaultBudget is a request's time when its caller gave none, and
	// maxBudget the most a caller may ask for.
	defaultBudget = 10 * time.Second
	maxBudget     = 30 * time.Second
	writeTimeout  = 10 * time.Second
)

// handler is an operation's registered handler: call takes and returns
// the operation's messages (the legacy protocol calls it so), serve their
// encodings.
type handler struct {
	name  string
	call  func(ctx context.Context, req any) (any, error)
	serve func(ctx context.Context, body []byte) ([]byte, error)
}

// ServerConfig configures a Server.
type ServerConfig struct {
	// Logger receives handler panics.
	Logger *slog.Logger
}

// Server answers requests with the handler registered for their
// operation (Handle), one request at a time per connection.
type Server struct {
	log      *slog.Logger
	mu       sync.RWMutex
	handlers map[OpID]handler
}

// NewServer returns a Server without handlers.
func NewServer(cfg ServerConfig) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Server{log: cfg.Logger, handlers: map[OpID]handler{}}
}

// Handle registers h as the handler of op: it gets the decoded request
// and returns the response or an error (sent as its code, errors.go). A
// request that does not decode is answered link.ErrInvalidInput, h not
// called.
func Handle[Req, Resp any](s *Server, op Op[Req, Resp], h func(ctx context.Context, req *Req) (*Resp, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handlers[op.ID] = handler{name: op.Name,
		call: func(ctx context.Context, req any) (any, error) { return h(ctx, req.(*Req)) },
		serve: func(ctx context.Context, body []byte) ([]byte, error) {
			req, err := op.req.Decode(body)
			if err != nil {
				return nil, fmt.Errorf("%w: %s request: %w", link.ErrInvalidInput, op.Name, err)
			}
			resp, err := h(ctx, req)
			if err != nil {
				return nil, err
			}
			return op.resp.Append(nil, resp), nil
		},
	}
}

func (s *Server) handler(id OpID) (handler, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h, ok := s.handlers[id]
	return h, ok
}

// Serve answers the connections accepted from l until l closes; ctx is
// the parent of every request's context, and its end closes the
// connections. It returns once every connection it served has closed.
func (s *Server) Serve(ctx context.Context, l net.Listener) {
	s.accept(ctx, l, s.serveConn)
}

func (s *Server) accept(ctx context.Context, l net.Listener, serve func(context.Context, net.Conn)) {
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		conns.Go(func() {
			defer c.Close()
			stop := context.AfterFunc(ctx, func() { _ = c.Close() })
			defer stop()
			serve(ctx, c)
		})
	}
}

func (s *Server) serveConn(ctx context.Context, c net.Conn) {
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	for hello := true; ; hello = false {
		_ = c.SetReadDeadline(time.Now().Add(IdleTimeout))
		frame, err := readFrame(r)
		if err != nil {
			return
		}
		var env envelope
		if err := envelopeCodec.DecodeInto(frame, &env); err != nil || hello != (env.Op == opHello.ID) {
			return // not a peer of this protocol
		}
		budget := time.Duration(env.BudgetMS) * time.Millisecond
		if budget <= 0 || budget > maxBudget {
			budget = defaultBudget
		}
		rctx, cancel := context.WithTimeout(ctx, budget)
		rep := s.answer(rctx, env.Op, env.Body)
		cancel()
		_ = c.SetWriteDeadline(time.Now().Add(writeTimeout))
		if err := writeFrame(w, replyCodec.Append(nil, &rep)); err != nil {
			return
		}
	}
}

// answer runs the handler of op on body.
func (s *Server) answer(ctx context.Context, op OpID, body []byte) (rep reply) {
	if op == opHello.ID {
		return reply{Body: helloCodec.Append(nil, &Hello{Version: ProtocolVersion})}
	}
	h, ok := s.handler(op)
	if !ok {
		rep.Code, rep.Detail = errorCode(fmt.Errorf("%w (operation %d)", ErrUnsupported, op))
		return rep
	}
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("peer request handler panicked", "op", h.name, "panic", p)
			rep = reply{Code: codeInternal, Detail: "internal error"}
		}
	}()
	out, err := h.serve(ctx, body)
	if err != nil {
		rep.Code, rep.Detail = errorCode(err)
		return rep
	}
	if len(out) > MaxFrame-64 {
		rep.Code, rep.Detail = errorCode(fmt.Errorf("%s answer of %d bytes is over the frame limit", h.name, len(out)))
		return rep
	}
	return reply{Body: out}
}
