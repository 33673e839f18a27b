package httpapi

import (
	_ "embed"
	"net/http"
	"strconv"
)

// openAPI is the OpenAPI 3.1 document of /api/v1 (issue 16, item 12). The
// httpapi tests validate every request the API accepts and every answer
// it gives against it, so it cannot drift from the code.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI document served at /api/v1/openapi.json.
func OpenAPI() []byte { return openAPI }

func (s *Server) registerOpenAPIRoute() {
	s.router.HandleFunc("/api/v1/openapi.json", s.measured("/api/v1/openapi.json", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(openAPI)))
		h.Set("Cache-Control", "public, max-age=300")
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			_, _ = w.Write(openAPI)
		}
	})).Methods(http.MethodGet, http.MethodHead)
}
