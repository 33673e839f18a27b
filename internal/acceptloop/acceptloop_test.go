package acceptloop

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// script is a listener whose Accept returns its steps in turn.
type script struct {
	net.Listener
	steps []error // nil: a connection
	calls int
}

func (s *script) Accept() (net.Conn, error) {
	if s.calls >= len(s.steps) {
		return nil, net.ErrClosed
	}
	err := s.steps[s.calls]
	s.calls++
	if err != nil {
		return nil, err
	}
	a, b := net.Pipe()
	b.Close()
	return a, nil
}

// TestRunWaitsOutErrorsAndStopsWhenClosed: accept errors other than a
// closed listener are waited out (out of file descriptors), each
// connection is handed on, and a closed listener ends the loop through
// closed; a closed done ends it without.
func TestRunWaitsOutErrorsAndStopsWhenClosed(t *testing.T) {
	t.Parallel()
	ln := &script{steps: []error{syscall.EMFILE, syscall.EMFILE, nil, syscall.ENFILE, nil}}
	handed, closed := 0, false
	start := time.Now()
	Run(ln, make(chan struct{}), func(c net.Conn) { handed++; c.Close() }, func() { closed = true })
	if handed != 2 || !closed || ln.calls != 5 {
		t.Fatalf("handed %d, closed %v, %d accepts", handed, closed, ln.calls)
	}
	if took := time.Since(start); took < 15*time.Millisecond {
		t.Fatalf("three errors waited out in %s: no backoff", took)
	}
	done := make(chan struct{})
	close(done)
	closed = false
	Run(&script{steps: []error{errors.New("boom")}}, done, func(net.Conn) {}, func() { closed = true })
	if closed {
		t.Fatal("a loop stopped by done called closed")
	}
}
