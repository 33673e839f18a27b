package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/link"
)

// bulkFilter selects the links of a bulk update or delete by tag (the
// caller's owner's; an admin key's, owner's or every owner's).
type bulkFilter struct {
	Tag   string `json:"tag"`
	Owner string `json:"owner"`
}

// bulkManageBody is POST /api/v1/links/bulk-update and bulk-delete: the
// codes, or a filter, and for an update the patch (as PATCH takes it).
type bulkManageBody struct {
	Codes  []string                   `json:"codes"`
	Filter *bulkFilter                `json:"filter"`
	Patch  map[string]json.RawMessage `json:"patch"`
}

// bulkCodeItem is one code's outcome.
type bulkCodeItem struct {
	Code    string    `json:"code"`
	Status  int       `json:"status"`
	Link    *linkJSON `json:"link,omitempty"`
	Problem *Problem  `json:"problem,omitempty"`
}

// bulkManageWorkers bounds the writes of one bulk update or delete in
// flight at once.
const bulkManageWorkers = 8

// handleBulkUpdate serves POST /api/v1/links/bulk-update: one patch
// applied to up to MaxBulkLinks links, each as PATCH
// /api/v1/links/{code} would, answered per code.
func (s *Server) handleBulkUpdate(w http.ResponseWriter, r *http.Request) {
	s.bulkManage(w, r, true)
}

// handleBulkDelete serves POST /api/v1/links/bulk-delete: up to
// MaxBulkLinks links deleted, each as DELETE /api/v1/links/{code} would,
// answered per code.
func (s *Server) handleBulkDelete(w http.ResponseWriter, r *http.Request) {
	s.bulkManage(w, r, false)
}

func (s *Server) bulkManage(w http.ResponseWriter, r *http.Request, update bool) {
	var b bulkManageBody
	if err := readJSONLimit(w, r, &b, s.maxBulkBody); err != nil {
		s.Error(w, r, err)
		return
	}
	bad := func(f, detail string) {
		s.Error(w, r, &requestError{status: http.StatusBadRequest, kind: "invalid-input", title: "Bad Request", detail: detail, field: f})
	}
	var patch link.Patch
	var pw *string // hashed once the limit has taken its tokens
	if update {
		if b.Patch == nil {
			bad("patch", "patch is required: the members PATCH /api/v1/links/{code} takes")
			return
		}
		var err error
		if patch, pw, err = s.validatePatch(b.Patch); err != nil {
			s.Error(w, r, err)
			return
		}
		if patch.Empty() && pw == nil {
			bad("patch", "the patch changes nothing")
			return
		}
	} else if b.Patch != nil {
		bad("patch", "a bulk delete takes no patch")
		return
	}
	p := principalOf(r)
	codes := b.Codes
	truncated := false
	switch {
	case (b.Codes == nil) == (b.Filter == nil):
		bad("codes", "give either codes or filter")
		return
	case b.Filter != nil:
		if b.Filter.Tag == "" || len(b.Filter.Tag) > 64 {
			bad("filter", "filter.tag is required (at most 64 bytes)")
			return
		}
		var ok bool
		if codes, truncated, ok = s.bulkCodesByTag(w, r, p, b.Filter); !ok {
			return
		}
	case len(b.Codes) == 0 || len(b.Codes) > MaxBulkLinks:
		bad("codes", fmt.Sprintf("codes must hold 1 to %d codes", MaxBulkLinks))
		return
	}
	// One rate-limit token per link, taken before any write; the password
	// (one hash for every link) is hashed only then.
	if len(codes) > 0 {
		if !s.limit(w, r, p, len(codes)) {
			return
		}
		if err := s.hashPatchPassword(r.Context(), &patch, pw); err != nil {
			s.Error(w, r, err)
			return
		}
	}

	ctx, cancel := context.WithTimeout(r.Context(), bulkTimeout)
	defer cancel()
	results := make([]bulkCodeItem, len(codes))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(bulkManageWorkers, len(codes)) {
		wg.Go(func() {
			for i := range work {
				results[i] = s.bulkOne(ctx, r, codes[i], update, patch)
			}
		})
	}
	for i := range codes {
		work <- i
	}
	close(work)
	wg.Wait()
	done, failed := 0, 0
	for _, it := range results {
		if it.Problem == nil {
			done++
		} else {
			failed++
		}
	}
	key := "deleted"
	if update {
		key = "updated"
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, r, http.StatusOK, map[string]any{key: done, "failed": failed, "results": results, "truncated": truncated})
}

// bulkCodesByTag lists the codes a bulk filter selects: pages until
// MaxBulkLinks, or what the caller's bucket can ever pay for (then
// truncated: the caller sends the filter again). A tag across owners is a
// scan, whose pages may be short (link.ListQuery.Scan). Each page takes a
// token before it is read, so a filter that matches nothing still pays for
// its scan. ok is false when an answer was written.
func (s *Server) bulkCodesByTag(w http.ResponseWriter, r *http.Request, p *principal, f *bulkFilter) (codes []string, truncated, ok bool) {
	owner, err := ownerScope(r, f.Owner, "filter.owner")
	if err != nil {
		s.Error(w, r, err)
		return nil, false, false
	}
	most := MaxBulkLinks
	if _, _, rate, limited := s.rateOf(p); limited && rate.PerSecond > 0 {
		most = max(min(most, rate.Burst/2), 1)
	}
	q := link.ListQuery{Owner: owner, Tag: f.Tag, Limit: most, Now: s.now()}
	for {
		if !s.limit(w, r, p, 1) {
			return nil, false, false
		}
		page, err := s.links.List(r.Context(), q)
		if err != nil {
			s.Error(w, r, err)
			return nil, false, false
		}
		for _, l := range page.Links {
			codes = append(codes, l.Code)
		}
		if page.Next == nil {
			break
		}
		if len(codes) >= most {
			truncated = true
			break
		}
		q.After, q.Limit = page.Next, most-len(codes)
	}
	return codes, truncated, true
}

// bulkOne updates or deletes one code as the single route would.
func (s *Server) bulkOne(ctx context.Context, r *http.Request, code string, update bool, patch link.Patch) bulkCodeItem {
	fail := func(err error) bulkCodeItem {
		pr := s.problemOf(r, err)
		return bulkCodeItem{Code: code, Status: pr.Status, Problem: &pr}
	}
	if !link.ValidCode(code) {
		return fail(link.ErrNotFound)
	}
	if err := s.checkOwner(r.WithContext(ctx), code); err != nil {
		return fail(err)
	}
	if !update {
		if err := s.links.Delete(ctx, code); err != nil {
			return fail(err)
		}
		return bulkCodeItem{Code: code, Status: http.StatusNoContent}
	}
	l, err := s.links.Update(ctx, code, patch)
	if err != nil {
		return fail(err)
	}
	if !principalOf(r).may(apikey.LinksRead) {
		return bulkCodeItem{Code: code, Status: http.StatusOK} // a write-only key reads nothing back
	}
	j := s.toJSON(l)
	j.Clicks = nil
	return bulkCodeItem{Code: code, Status: http.StatusOK, Link: &j}
}
