package httpapi

import (
	"net/http"
)

func (s *Server) registerHealthRoutes(metrics http.Handler) {
	s.router.HandleFunc("/healthz", s.handleHealthz).Methods(http.MethodGet, http.MethodHead)
	s.router.HandleFunc("/readyz", s.handleReadyz).Methods(http.MethodGet, http.MethodHead)
	if metrics != nil {
		s.router.Handle("/metrics", metrics).Methods(http.MethodGet, http.MethodHead)
	}
}

func (s *Server) registerAdminRoutes() {
	s.router.HandleFunc("/admin/v1/cluster", s.measured("/admin/v1/cluster", s.handleCluster)).Methods(http.MethodGet, http.MethodHead)
}

// handleHealthz serves GET /healthz: 200 while the process runs.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, r, http.StatusOK, map[string]string{"status": "ok"})
}

// handleReadyz serves GET /readyz: 200 when every local group has a leader
// and this node has applied what it knows to be committed; 503 with the
// reason otherwise.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	if err := s.svc.Ready(); err != nil {
		w.Header().Set("Retry-After", "1")
		s.problem(w, r, http.StatusServiceUnavailable, "not-ready", "Service Unavailable", err.Error())
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, r, http.StatusOK, map[string]string{"status": "ready"})
}

// handleCluster serves GET /admin/v1/cluster.
func (s *Server) handleCluster(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, r, http.StatusOK, s.svc.Status())
}
