package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/linkraft/linkraft/internal/password"
	"github.com/linkraft/linkraft/link"
)

// ProblemTypeBase prefixes every problem "type". The identifiers are stable:
// clients may switch on them.
const ProblemTypeBase = "/problems/"

// Problem is an RFC 9457 problem document.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Field names the offending input field, if one.
	Field string `json:"field,omitempty"`
}

// requestError is an HTTP-level input failure (body, content type, JSON).
type requestError struct {
	status int
	kind   string
	title  string
	detail string
	field  string
}

func (e *requestError) Error() string { return e.detail }

func badRequest(kind, detail string) error {
	return &requestError{status: http.StatusBadRequest, kind: kind, title: "Bad Request", detail: detail}
}

// Error writes err as a problem document and returns its status: the one
// place where errors become statuses. Only unexpected errors are logged.
func (s *Server) Error(w http.ResponseWriter, r *http.Request, err error) int {
	p := s.problemOf(r, err)
	if p.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	s.problemField(w, r, p.Status, strings.TrimPrefix(p.Type, ProblemTypeBase), p.Title, p.Detail, p.Field)
	return p.Status
}

// problemOf maps err to its problem document (and logs the unexpected).
func (s *Server) problemOf(r *http.Request, err error) Problem {
	var re *requestError
	var fe *link.FieldError
	p := func(status int, kind, title, detail, field string) Problem {
		return Problem{Type: ProblemTypeBase + kind, Title: title, Status: status, Detail: detail, Field: field}
	}
	switch {
	case errors.As(err, &re):
		return p(re.status, re.kind, re.title, re.detail, re.field)
	case errors.As(err, &fe):
		kind := "invalid-input"
		switch {
		case errors.Is(fe.Err, link.ErrInvalidURL):
			kind = "invalid-url"
		case errors.Is(fe.Err, link.ErrInvalidAlias):
			kind = "invalid-alias"
		}
		return p(http.StatusBadRequest, kind, "Bad Request", fe.Error(), fe.Field)
	case errors.Is(err, link.ErrIdempotencyMismatch):
		return s.problemOf(r, errIdempotencyReused)
	case errors.Is(err, link.ErrClaimedCodeTaken):
		return p(http.StatusConflict, "idempotency-key-conflict", "Conflict", err.Error(), "Idempotency-Key")
	case errors.Is(err, link.ErrAliasTaken):
		return p(http.StatusConflict, "alias-taken", "Conflict", "the code is already in use", "")
	case errors.Is(err, link.ErrNotFound):
		return p(http.StatusNotFound, "not-found", "Not Found", "no link has this code", "")
	case errors.Is(err, errTakenDown):
		return p(http.StatusGone, "gone", "Gone", "the link was disabled for abuse", "")
	case errors.Is(err, link.ErrDeleted):
		return p(http.StatusGone, "gone", "Gone", "the link was deleted", "")
	case errors.Is(err, errExpired), errors.Is(err, errDisabled), errors.Is(err, errUsedUp):
		return p(http.StatusGone, "gone", "Gone", strings.TrimPrefix(err.Error(), link.ErrGone.Error()+": "), "")
	case errors.Is(err, link.ErrGone):
		return p(http.StatusGone, "gone", "Gone", "the link is expired, disabled or deleted", "")
	case errors.Is(err, link.ErrInsufficientStorage):
		s.log.Warn("write refused: storage alarm", "method", r.Method, "path", r.URL.Path, "err", err)
		return p(http.StatusInsufficientStorage, "insufficient-storage", "Insufficient Storage",
			"the cluster is refusing new writes until a node has disk space again; reads and redirects are served", "")
	case errors.Is(err, link.ErrInvalidInput):
		return p(http.StatusBadRequest, "invalid-input", "Bad Request", err.Error(), "")
	case errors.Is(err, password.ErrBusy):
		s.log.Warn("password hashing busy", "method", r.Method, "path", r.URL.Path)
		return p(http.StatusServiceUnavailable, "unavailable", "Service Unavailable", "too many password checks at once; retry", "")
	case errors.Is(err, link.ErrUpgradeNeeded):
		s.log.Warn("request waits for an upgrade", "method", r.Method, "path", r.URL.Path, "err", err)
		return p(http.StatusServiceUnavailable, "upgrade-needed", "Service Unavailable",
			"a node of the cluster runs, or last ran, an older version that cannot keep this; it is taken once every node is upgraded (or the old one removed)", "")
	case errors.Is(err, link.ErrNotLeader), errors.Is(err, link.ErrUnavailable), errors.Is(err, link.ErrExhausted):
		s.log.Warn("request unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		return p(http.StatusServiceUnavailable, "unavailable", "Service Unavailable", "the cluster cannot serve this request right now; retry", "")
	}
	s.log.Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
	return p(http.StatusInternalServerError, "internal", "Internal Server Error", "", "")
}

func (s *Server) problem(w http.ResponseWriter, r *http.Request, status int, kind, title, detail string) {
	s.problemField(w, r, status, kind, title, detail, "")
}

func (s *Server) problemField(w http.ResponseWriter, r *http.Request, status int, kind, title, detail, field string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	_ = json.NewEncoder(w).Encode(Problem{Type: ProblemTypeBase + kind, Title: title, Status: status, Detail: detail, Field: field})
}

// wantsHTML reports whether the client is a browser that prefers an HTML
// page to a problem document.
func wantsHTML(r *http.Request) bool {
	accept := r.Header.Get("Accept")
	return strings.Contains(accept, "text/html") && !strings.Contains(accept, "application/problem+json")
}
