package httpapi

import (
	"encoding/csv"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/linkraft/linkraft/httpapi/importer"
	"github.com/linkraft/linkraft/link"
)

// exportCost is the rate-limit tokens an export takes up front: its first
// page. Each later page of up to link.MaxListLimit links takes as many
// again, paced (the export waits for them rather than failing part-way),
// so a large export streams at the key's rate: with the default 50 a
// second, 5,000 links a second, about 50 ms of CPU.
const exportCost = 10

// exportPageTimeout is how long one page of an export may take to write.
const exportPageTimeout = 30 * time.Second

// exportColumns is the CSV export's header row.
var exportColumns = []string{"code", "short_url", "url", "title", "description", "tags", "owner", "created_at", "updated_at",
	"expires_at", "redirect", "disabled", "max_visits", "forward_query", "password_protected", "rules"}

// handleExport serves GET /api/v1/links/export?format=ndjson|csv: every
// live link of the caller's owner (an admin key's: every owner's, or
// owner's), oldest first, streamed a listing page at a time. NDJSON lines
// are the link JSON (without clicks); CSV has exportColumns, tags joined
// by ";". A failure part-way aborts the response, so a cut-short file is
// never taken for a whole one.
func (s *Server) handleExport(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	format := v.Get("format")
	switch format {
	case "":
		format = "ndjson"
	case "ndjson", "csv":
	default:
		s.Error(w, r, field("format", "must be ndjson or csv", link.ErrInvalidInput))
		return
	}
	owner, err := ownerScope(r, v.Get("owner"), "owner")
	if err != nil {
		s.Error(w, r, err)
		return
	}
	q := link.ListQuery{Owner: owner, Limit: link.MaxListLimit, Now: s.now()}
	// The first page before the status, so that a cluster that cannot
	// list answers with a problem, not a broken file.
	page, err := s.links.List(r.Context(), q)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	h := w.Header()
	name := "links-" + s.now().UTC().Format("20060102T150405Z") + "." + format
	h.Set("Content-Disposition", `attachment; filename="`+name+`"`)
	h.Set("Cache-Control", "no-store") // notes and owners: nothing a cache keeps
	if format == "csv" {
		h.Set("Content-Type", "text/csv; charset=utf-8")
	} else {
		h.Set("Content-Type", "application/x-ndjson")
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	cw := csv.NewWriter(w)
	enc := json.NewEncoder(w)
	if format == "csv" {
		_ = cw.Write(exportColumns)
	}
	rc := http.NewResponseController(w)
	for {
		// The server's write timeout holds for each page, not the whole
		// export: a large one streams for as long as it takes.
		_ = rc.SetWriteDeadline(time.Now().Add(exportPageTimeout))
		for _, l := range page.Links {
			j := s.toJSON(l)
			j.Clicks = nil
			var err error
			if format == "csv" {
				err = cw.Write(exportRow(&j))
			} else {
				err = enc.Encode(&j)
			}
			if err != nil {
				return // the client went away
			}
		}
		cw.Flush()
		_ = rc.Flush()
		if page.Next == nil {
			return
		}
		q.After = page.Next
		if err := s.pace(r.Context(), principalOf(r), exportCost); err != nil {
			return // the client went away
		}
		if page, err = s.links.List(r.Context(), q); err != nil {
			s.log.Warn("export cut short", "owner", q.Owner, "err", err)
			panic(http.ErrAbortHandler)
		}
	}
}

// exportRow is one link as a CSV row of exportColumns. Cells of free text
// are made safe to open in a spreadsheet (importer.CSVSafe).
func exportRow(j *linkJSON) []string {
	expires := ""
	if j.ExpiresAt != nil {
		expires = j.ExpiresAt.Format(time.RFC3339Nano)
	}
	maxVisits := ""
	if j.MaxVisits != nil {
		maxVisits = strconv.FormatUint(*j.MaxVisits, 10)
	}
	rules := "" // the rules as the JSON array the API takes, "" for none
	if len(j.Rules) > 0 {
		b, _ := json.Marshal(j.Rules)
		rules = string(b)
	}
	return []string{importer.CSVSafe(j.Code), j.ShortURL, j.URL, importer.CSVSafe(j.Title), importer.CSVSafe(j.Description),
		importer.CSVSafe(strings.Join(j.Tags, ";")), importer.CSVSafe(j.Owner),
		j.CreatedAt.Format(time.RFC3339Nano), j.UpdatedAt.Format(time.RFC3339Nano), expires, strconv.Itoa(j.Redirect),
		strconv.FormatBool(j.Disabled), maxVisits, strconv.FormatBool(j.ForwardQuery), strconv.FormatBool(j.PasswordProtected), rules}
}
