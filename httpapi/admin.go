package httpapi

import (
	"errors"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/linkraft/linkraft/cluster"
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
	s.router.HandleFunc("/admin/v1/nodes/{id}", s.measured("/admin/v1/nodes/{id}", s.handleRemoveNode)).Methods(http.MethodDelete)
}

// handleRemoveNode serves DELETE /admin/v1/nodes/{id}: the operator removes
// a node (dead or alive) from the cluster; it is never added back under that
// ID. 204 on success (also when it was removed before), 404 for an unknown
// ID.
func (s *Server) handleRemoveNode(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	if err := s.svc.RemoveNode(r.Context(), id); err != nil {
		if errors.Is(err, cluster.ErrUnknownNode) {
			s.problem(w, r, http.StatusNotFound, "unknown-node", "Not Found", "no node has this ID")
			return
		}
		s.Error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
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
