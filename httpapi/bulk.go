package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/linkraft/linkraft/link"
)

// MaxBulkLinks bounds the links of one POST /api/v1/links/bulk.
const MaxBulkLinks = 1000

// bulkTimeout bounds the cluster work of one bulk create.
const bulkTimeout = 20 * time.Second

// DefaultMaxBulkBodyBytes bounds a bulk create's body unless configured.
const DefaultMaxBulkBodyBytes = 8 << 20

// bulkBody is POST /api/v1/links/bulk: the links, each as POST
// /api/v1/links takes one.
type bulkBody struct {
	Links []createBody `json:"links"`
}

// bulkItem is one link's outcome: status 201 and the link, or the status
// and problem document a single create would have answered.
type bulkItem struct {
	Status  int       `json:"status"`
	Link    *linkJSON `json:"link,omitempty"`
	Problem *Problem  `json:"problem,omitempty"`
}

// bulkResponse answers a bulk create, results in request order.
type bulkResponse struct {
	Created int        `json:"created"`
	Failed  int        `json:"failed"`
	Results []bulkItem `json:"results"`
}

// handleBulkCreate serves POST /api/v1/links/bulk: up to MaxBulkLinks
// creates in one request, each succeeding or failing on its own (a bad URL
// or a taken alias fails that link only). A body that is not a well-formed
// list — malformed JSON, an unknown field, no links, too many — fails the
// whole request and nothing is stored. The answer is 200 with one result per
// link; the cluster writes each shard's share as one Raft entry, which is
// what makes it the way to import many links.
func (s *Server) handleBulkCreate(w http.ResponseWriter, r *http.Request) {
	key, raw, err := idempotent(r)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	once := raw != nil
	var b bulkBody
	if err := readJSONLimit(w, r, &b, s.maxBulkBody); err != nil {
		s.Error(w, r, err)
		return
	}
	switch {
	case b.Links == nil:
		s.Error(w, r, &requestError{status: http.StatusBadRequest, kind: "invalid-input", title: "Bad Request",
			detail: "links is required: a list of links as POST /api/v1/links takes them", field: "links"})
		return
	case len(b.Links) == 0 || len(b.Links) > MaxBulkLinks:
		s.Error(w, r, &requestError{status: http.StatusBadRequest, kind: "invalid-input", title: "Bad Request",
			detail: fmt.Sprintf("links must hold 1 to %d links", MaxBulkLinks), field: "links"})
		return
	}
	if once && slices.ContainsFunc(b.Links, func(c createBody) bool { return c.Password != nil }) {
		s.Error(w, r, errIdempotencyPassword)
		return
	}
	// One rate-limit token per link.
	p := principalOf(r)
	if !s.limit(w, r, p, len(b.Links)) {
		return
	}
	out := bulkResponse{Results: make([]bulkItem, len(b.Links))}
	reqs := make([]link.CreateRequest, 0, len(b.Links))
	pos := make([]int, 0, len(b.Links)) // reqs[j] is link pos[j]
	for i := range b.Links {
		req, err := s.validateCreate(&b.Links[i])
		if err == nil && b.Links[i].Password != nil {
			// A hash each would be up to 1,000 argon2id hashes in one
			// request: a bulk create makes open links, and PATCH or
			// bulk-update (one hash for all) protects them.
			err = field("password", "a bulk create takes no password: set it with PATCH /api/v1/links/{code} or bulk-update", link.ErrInvalidInput)
		}
		if err != nil {
			out.Results[i] = s.bulkFailure(r, err)
			continue
		}
		req.Owner = p.owner()
		reqs = append(reqs, req)
		pos = append(pos, i)
	}
	if len(reqs) > 0 {
		// Within the server's write timeout (30 s in linknode), so that a
		// slow cluster answers with per-link 503s, not a dropped connection.
		ctx, cancel := context.WithTimeout(r.Context(), bulkTimeout)
		defer cancel()
		var results []link.CreateResult
		if once {
			var replayed bool
			// The claim's codes follow the valid rows: which rows those
			// were is part of the fingerprint, so a retry whose rows'
			// validity changed (an expiry passed) is refused, never
			// answered with another row's link.
			fingerprint := raw.Bytes()
			for _, i := range pos {
				fingerprint = fmt.Appendf(fingerprint, "\x00%d", i)
			}
			if results, replayed, err = s.links.CreateManyOnce(ctx, reqs, idempotencyOf(p, key, fingerprint)); err != nil {
				s.Error(w, r, err)
				return
			}
			markReplayed(w, replayed)
		} else {
			results = s.links.CreateMany(ctx, reqs)
		}
		for j, res := range results {
			if res.Err != nil {
				out.Results[pos[j]] = s.bulkFailure(r, res.Err)
				continue
			}
			l := s.toJSON(res.Link)
			out.Results[pos[j]] = bulkItem{Status: http.StatusCreated, Link: &l}
		}
	}
	for _, it := range out.Results {
		if it.Status == http.StatusCreated {
			out.Created++
		} else {
			out.Failed++
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, r, http.StatusOK, out)
}

func (s *Server) bulkFailure(r *http.Request, err error) bulkItem {
	p := s.problemOf(r, err)
	return bulkItem{Status: p.Status, Problem: &p}
}
