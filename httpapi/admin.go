package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/gorilla/mux"

	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/internal/status"
	"github.com/linkraft/linkraft/link"
)

func (s *Server) registerHealthRoutes(rt *mux.Router) {
	rt.HandleFunc("/healthz", s.handleHealthz).Methods(http.MethodGet, http.MethodHead)
	rt.HandleFunc("/readyz", s.handleReadyz).Methods(http.MethodGet, http.MethodHead)
}

// registerAdminRoutes fills the admin listener's router: every /admin/v1
// route needs an admin key; /metrics needs none (keep the admin listener
// where only operators and the scraper reach it).
func (s *Server) registerAdminRoutes(metrics http.Handler, profiles bool) {
	rt := s.adminRouter
	admin := func(route string, h http.HandlerFunc) http.HandlerFunc {
		return s.measured(route, s.authed(apikey.Admin, 1, false, h))
	}
	rt.HandleFunc("/admin/v1/cluster", admin("/admin/v1/cluster", s.handleCluster)).Methods(http.MethodGet, http.MethodHead)
	rt.HandleFunc("/admin/v1/nodes/{id}", admin("/admin/v1/nodes/{id}", s.handleRemoveNode)).Methods(http.MethodDelete)
	rt.HandleFunc("/admin/v1/nodes/{id}/drain", admin("/admin/v1/nodes/{id}/drain", s.handleDrain)).Methods(http.MethodGet, http.MethodPost, http.MethodDelete)
	rt.HandleFunc("/admin/v1/leases", admin("/admin/v1/leases", s.handleLeases)).Methods(http.MethodGet, http.MethodHead)
	rt.HandleFunc("/admin/v1/links", admin("/admin/v1/links", s.handleLocalLinks)).Methods(http.MethodGet, http.MethodHead)
	rt.HandleFunc("/admin/v1/digest", admin("/admin/v1/digest", s.handleDigest)).Methods(http.MethodGet, http.MethodHead)
	rt.HandleFunc("/admin/v1/backup", admin("/admin/v1/backup", s.handleBackup)).Methods(http.MethodGet)
	rt.HandleFunc("/admin/v1/restore", admin("/admin/v1/restore", s.handleRestore)).Methods(http.MethodPost)
	if metrics != nil {
		rt.Handle("/metrics", metrics).Methods(http.MethodGet, http.MethodHead)
	}
	if profiles {
		rt.HandleFunc("/debug/pprof/", pprof.Index)
		rt.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		rt.HandleFunc("/debug/pprof/profile", pprof.Profile)
		rt.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		rt.HandleFunc("/debug/pprof/trace", pprof.Trace)
		rt.PathPrefix("/debug/pprof/").HandlerFunc(pprof.Index)
	}
}

// handleLeases serves GET /admin/v1/leases: every ID range the meta group
// granted, as this node's replica knows them: {"leases":[{start,end,node}]}.
func (s *Server) handleLeases(w http.ResponseWriter, r *http.Request) {
	leases, err := s.admin.Leases()
	if err != nil {
		s.Error(w, r, err)
		return
	}
	if leases == nil {
		leases = []status.Lease{}
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, r, http.StatusOK, map[string]any{"leases": leases})
}

// handleDigest serves GET /admin/v1/digest: a digest of this node's replica
// of the meta group and of every shard it hosts, each with the applied index
// it is as of: {"groups":[{group, applied_index, items, digest}]}.
// Replicas of a group at the same applied index must agree; the chaos
// harness checks that they do. It reads every local link once (like
// /admin/v1/links), so it is an audit tool, not a probe.
func (s *Server) handleDigest(w http.ResponseWriter, r *http.Request) {
	groups, err := s.admin.Digests()
	if err != nil {
		s.Error(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, r, http.StatusOK, map[string]any{"groups": groups})
}

// localLink is one row of GET /admin/v1/links.
type localLink struct {
	Code    string `json:"code"`
	URL     string `json:"url"`
	Deleted bool   `json:"deleted,omitempty"`
	Version uint64 `json:"version"`
}

// handleLocalLinks serves GET /admin/v1/links: every link (tombstones
// included) in the shard replicas this node hosts, read from its own bbolt
// files, one JSON object per line (application/x-ndjson). It is a debugging
// and audit view of one replica, not a consistent listing.
func (s *Server) handleLocalLinks(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	enc := json.NewEncoder(w)
	err := s.admin.ForEachLink(func(l *link.Link) bool {
		return enc.Encode(localLink{Code: l.Code, URL: l.URL, Deleted: l.Deleted, Version: l.Version}) == nil
	})
	if err != nil {
		// The status is sent; a truncated stream ends with an error line.
		_ = enc.Encode(map[string]string{"error": err.Error()})
	}
}

// handleRemoveNode serves DELETE /admin/v1/nodes/{id}: the operator removes
// a node (dead or alive) from the cluster; it is never added back under that
// ID. 204 on success (also when it was removed before), 404 for an unknown
// ID.
func (s *Server) handleRemoveNode(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	if err := s.admin.RemoveNode(r.Context(), id); err != nil {
		if errors.Is(err, status.ErrUnknownNode) {
			s.problem(w, r, http.StatusNotFound, "unknown-node", "Not Found", "no node has this ID")
			return
		}
		s.Error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleDrain serves /admin/v1/nodes/{id}/drain: POST starts draining
// the node (its replicas move to other nodes, one at a time), DELETE calls
// it off, GET reads its progress. Each answers 200 with {"node",
// "draining", "replicas"} (replicas: those the placement still puts on
// the node); 404 for an unknown node, 409 when the other nodes are too
// few to take its replicas.
func (s *Server) handleDrain(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	var err error
	switch r.Method {
	case http.MethodPost:
		err = s.admin.DrainNode(r.Context(), id, true)
	case http.MethodDelete:
		err = s.admin.DrainNode(r.Context(), id, false)
	}
	var draining bool
	var replicas int
	if err == nil {
		draining, replicas, err = s.admin.DrainStatus(id)
	}
	switch {
	case errors.Is(err, status.ErrUnknownNode):
		s.problem(w, r, http.StatusNotFound, "unknown-node", "Not Found", "no node has this ID")
	case errors.Is(err, status.ErrCannotDrain):
		s.problem(w, r, http.StatusConflict, "cannot-drain", "Conflict", err.Error())
	case err != nil:
		s.Error(w, r, err)
	default:
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, r, http.StatusOK, map[string]any{"node": id, "draining": draining, "replicas": replicas})
	}
}

// handleHealthz serves GET /healthz: 200 while the process runs.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, r, http.StatusOK, map[string]string{"status": "ok"})
}

// readyzWait bounds how long /readyz waits for groups to apply what was
// committed when the probe arrived (an apply in flight takes milliseconds).
const readyzWait = time.Second

// handleReadyz serves GET /readyz: 200 when every local group has a leader
// and this node has applied what was committed when the probe arrived (it
// waits up to a second for applies in flight); 503 with the reason
// otherwise.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyzWait)
	defer cancel()
	if err := s.admin.Ready(ctx); err != nil {
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
	writeJSON(w, r, http.StatusOK, s.admin.Status())
}
