package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/linkraft/linkraft/httpapi/importer"
	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/link"
)

// Import (issue 16, item 3): POST /api/v1/links/import takes a file in any
// format package importer reads, streamed: rows are read a chunk at a time
// and each chunk goes through the bulk create path, and the answer streams
// one NDJSON result a row as the chunks finish, then a summary line. So
// an import of any size holds one chunk in memory, and its client sees
// progress as it goes.

// Bounds of an import: the body, the rows a chunk holds (one CreateMany),
// and how long each chunk may take to read and answer (the server's
// timeouts are pushed back a chunk at a time).
const (
	DefaultMaxImportBytes = 256 << 20
	importChunk           = 500
	importChunkTimeout    = 30 * time.Second
	// importCreateTimeout bounds a chunk's creates, inside the chunk's
	// timeout, so that a stalled cluster answers the chunk's rows with
	// 503s and the answer goes on.
	importCreateTimeout = 20 * time.Second
)

// importResult is one row's outcome (a line of the answer).
type importResult struct {
	Row     int       `json:"row"`
	Status  int       `json:"status"`
	Link    *linkJSON `json:"link,omitempty"`
	Problem *Problem  `json:"problem,omitempty"`
}

// importSummary is the answer's last line.
type importSummary struct {
	Done    bool     `json:"done"`
	Format  string   `json:"format"`
	Rows    int      `json:"rows"`
	Created int      `json:"created"`
	Failed  int      `json:"failed"`
	Problem *Problem `json:"problem,omitempty"`
}

// handleImport serves POST /api/v1/links/import. A file of no known format
// is 400 before anything is stored; after that the status is 200 and each
// row's result (201 with the link, or the problem a create would answer)
// is a line. The links belong to the caller's owner; an admin key's import
// keeps the owner column of linkraft's own export. A password cannot be
// imported (see the bulk create). A failure part-way (malformed JSON, the
// client gone) ends the answer with a summary line holding the problem;
// the rows before it are stored.
func (s *Server) handleImport(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	// The answer streams while the body is still being read.
	_ = rc.EnableFullDuplex()
	_ = rc.SetReadDeadline(time.Now().Add(importChunkTimeout))
	body := http.MaxBytesReader(w, r.Body, s.maxImport)
	rd, err := importer.New(body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			s.Error(w, r, &requestError{status: http.StatusRequestEntityTooLarge, kind: "body-too-large", title: "Content Too Large",
				detail: fmt.Sprintf("the body is over %d bytes", s.maxImport)})
			return
		}
		s.Error(w, r, badRequest("unknown-format", err.Error()+": send linkraft CSV (a header with url) or NDJSON, or an export of Shlink, Kutt, YOURLS or Bitly"))
		return
	}
	p := principalOf(r)
	chunk := importChunk
	if _, _, rate, limited := s.rateOf(p); limited {
		chunk = max(1, min(chunk, rate.Burst))
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	sum := importSummary{Done: true}
	var ended error
	for ended == nil {
		_ = rc.SetReadDeadline(time.Now().Add(importChunkTimeout))
		var rows []importer.Row
		for len(rows) < chunk {
			row, err := rd.Next()
			if err != nil {
				if err != io.EOF {
					ended = err
				} else {
					ended = io.EOF
				}
				break
			}
			rows = append(rows, row)
		}
		if len(rows) == 0 {
			break
		}
		ctx, cancel := context.WithTimeout(r.Context(), importCreateTimeout)
		if err := s.pace(ctx, p, len(rows)); err != nil {
			cancel()
			ended = err
			break
		}
		results := s.importChunk(ctx, r, p, rows)
		cancel()
		_ = rc.SetWriteDeadline(time.Now().Add(importChunkTimeout))
		for _, res := range results {
			sum.Rows++
			if res.Status == http.StatusCreated {
				sum.Created++
			} else {
				sum.Failed++
			}
			if err := enc.Encode(&res); err != nil {
				return // the client went away
			}
		}
		_ = rc.Flush()
	}
	_ = rc.SetWriteDeadline(time.Now().Add(importChunkTimeout))
	sum.Format = rd.Format()
	if ended != nil && ended != io.EOF {
		pr := s.problemOf(r, badRequest("import-cut-short", ended.Error()))
		sum.Problem = &pr
	}
	_ = enc.Encode(&sum)
}

// importChunk validates rows as creates and makes the valid ones in one
// CreateMany, answering each in order.
func (s *Server) importChunk(ctx context.Context, r *http.Request, p *principal, rows []importer.Row) []importResult {
	out := make([]importResult, len(rows))
	reqs := make([]link.CreateRequest, 0, len(rows))
	pos := make([]int, 0, len(rows))
	fail := func(i int, err error) {
		pr := s.problemOf(r, err)
		out[i] = importResult{Row: rows[i].N, Status: pr.Status, Problem: &pr}
	}
	for i, row := range rows {
		switch {
		case row.Err != nil:
			fail(i, badRequest("malformed-row", row.Err.Error()))
			continue
		case row.PasswordProtected:
			// The export has no password: imported, the link would
			// redirect without asking.
			fail(i, field("password_protected", "a password link is not imported (the export holds no password): create it and set its password", link.ErrInvalidInput))
			continue
		case row.Disabled:
			// A create makes a live link: imported, it would redirect.
			fail(i, field("disabled", "a disabled link is not imported (it would be live): create it and disable it, or leave it out", link.ErrInvalidInput))
			continue
		}
		b := createBody{URL: &row.URL, Title: &row.Title, Description: &row.Description, Tags: row.Tags, ForwardQuery: row.ForwardQuery}
		if row.Alias != "" {
			b.Alias = &row.Alias
		}
		if row.ExpiresAt != "" {
			b.ExpiresAt = &row.ExpiresAt
		}
		if row.Redirect != 0 {
			b.Redirect = &row.Redirect
		}
		if row.MaxVisits != 0 {
			b.MaxVisits = &row.MaxVisits
		}
		for _, rl := range row.Rules {
			b.Rules = append(b.Rules, ruleJSON(rl))
		}
		req, err := s.validateCreate(&b)
		if err != nil {
			fail(i, err)
			continue
		}
		req.Owner = p.owner()
		if row.Owner != "" && p.admin() && row.Owner != req.Owner {
			if err := apikey.ValidName("owner", row.Owner); err != nil {
				fail(i, field("owner", err.Error(), link.ErrInvalidInput))
				continue
			}
			req.Owner = row.Owner
		}
		reqs = append(reqs, req)
		pos = append(pos, i)
	}
	if len(reqs) > 0 {
		for j, res := range s.links.CreateMany(ctx, reqs) {
			i := pos[j]
			if res.Err != nil {
				fail(i, res.Err)
				continue
			}
			l := s.toJSON(res.Link)
			out[i] = importResult{Row: rows[i].N, Status: http.StatusCreated, Link: &l}
		}
	}
	return out
}
