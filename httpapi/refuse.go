package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/linkraft/linkraft/internal/connguard"
)

// RefuseConn answers a connection the listener refused (connguard) on
// plain HTTP/1.1, before it is closed: 429 when its client holds too many
// connections, 503 when the listener is full; a problem document either
// way, with Retry-After and Connection: close. The request is not read.
func RefuseConn(w io.Writer, r connguard.Reason) {
	p := Problem{Type: ProblemTypeBase + "too-many-connections", Title: "Too Many Requests", Status: http.StatusTooManyRequests,
		Detail: "this client holds as many connections as one client may (-max-conns-per-client); reuse one, or close some"}
	if r == connguard.Full {
		p = Problem{Type: ProblemTypeBase + "unavailable", Title: "Service Unavailable", Status: http.StatusServiceUnavailable,
			Detail: "every connection slot is taken (-max-conns); retry"}
	}
	body, _ := json.Marshal(p)
	_, _ = fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: application/problem+json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		p.Status, http.StatusText(p.Status), len(body), body)
}
