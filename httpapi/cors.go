package httpapi

import (
	"net/http"
	"strings"
)

// corsHeaders sets CORS fields on an /api/ response for an allowed Origin
// (Config.CORSOrigins), and answers a preflight (OPTIONS with
// Access-Control-Request-Method) itself, reporting true. Other origins get
// no CORS fields: the browser keeps the answer from the page. Writes also
// need a JSON Content-Type (jsonio.go), which a cross-site form cannot
// send without a preflight.
func (s *Server) corsHeaders(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || (!s.corsAny && !s.cors[origin]) {
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
	h.Set("Access-Control-Expose-Headers", "Location, RateLimit, RateLimit-Policy, Retry-After, Idempotent-Replayed")
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		return false
	}
	h.Set("Access-Control-Allow-Methods", "GET, HEAD, POST, PATCH, DELETE")
	h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Idempotency-Key")
	h.Set("Access-Control-Max-Age", "600")
	h.Add("Vary", "Access-Control-Request-Method, Access-Control-Request-Headers")
	w.WriteHeader(http.StatusNoContent)
	return true
}

// corsOriginValid checks a -cors-origins entry: "*" or scheme://host[:port].
func corsOriginValid(o string) bool {
	if o == "*" {
		return true
	}
	rest, ok := strings.CutPrefix(o, "https://")
	if !ok {
		rest, ok = strings.CutPrefix(o, "http://")
	}
	return ok && rest != "" && !strings.ContainsAny(rest, "/?#@ ")
}
