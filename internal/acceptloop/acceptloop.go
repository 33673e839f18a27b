// Package acceptloop is the accept loop of a listener wrapper that
// serves its connections on goroutines of its own (the redirect fast
// path, the connection guard): net/http's handling of accept errors
// without net/http.
package acceptloop

import (
	"errors"
	"net"
	"time"
)

// Run accepts from ln and hands each connection to handle until ln is
// closed or done is. A closed ln (net.ErrClosed) while done is open calls
// closed, if set, so the wrapper closes too. Any other error (out of file
// descriptors) is waited out as net/http does: 5 ms, doubling up to 1 s,
// reset by the next connection.
func Run(ln net.Listener, done <-chan struct{}, handle func(net.Conn), closed func()) {
	var pause time.Duration
	for {
		c, err := ln.Accept()
		if err == nil {
			pause = 0
			handle(c)
			continue
		}
		select {
		case <-done:
			return
		default:
		}
		if errors.Is(err, net.ErrClosed) {
			if closed != nil {
				closed()
			}
			return
		}
		pause = min(max(2*pause, 5*time.Millisecond), time.Second)
		select {
		case <-time.After(pause):
		case <-done:
			return
		}
	}
}
