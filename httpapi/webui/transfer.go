package webui

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"
)

// transferPage serves GET /ui/transfer: export and import.
func (u *UI) transferPage(w http.ResponseWriter, r *http.Request) {
	u.render(w, r, http.StatusOK, "transfer", view{Title: "Import and export", Nav: "transfer", Data: &importData{}})
}

// export serves GET /ui/export?format=csv|ndjson: the API's export,
// streamed to the browser as a download.
func (u *UI) export(w http.ResponseWriter, r *http.Request) {
	f := r.URL.Query().Get("format")
	if f != "csv" && f != "ndjson" {
		u.errorPage(w, r, http.StatusBadRequest, "Unknown format", "Export as csv or ndjson.")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	u.api.ServeHTTP(w, apiRequest(r, http.MethodGet, "/api/v1/links/export?format="+f, nil))
}

type importData struct {
	Done          bool
	Rows, Created int
	Failed        int
	// Failures are the first failed rows.
	Failures []string
	Problem  string
}

// maxImportFailures bounds the failed rows an import page lists.
const maxImportFailures = 50

// importLinks serves POST /ui/import: a multipart form whose first part
// is the CSRF token and whose second is the file, streamed to the API's
// import as it arrives; the page lists what was created and what failed.
func (u *UI) importLinks(w http.ResponseWriter, r *http.Request) {
	d := &importData{}
	fail := func(status int, msg string) {
		d.Problem = msg
		u.render(w, r, status, "transfer", view{Title: "Import and export", Nav: "transfer", Data: d, Push: "/ui/transfer"})
	}
	mr, err := r.MultipartReader()
	if err != nil {
		fail(http.StatusBadRequest, "Send the form with its file.")
		return
	}
	part, err := mr.NextPart()
	if err != nil || part.FormName() != "csrf" {
		u.errorPage(w, r, http.StatusForbidden, "Refused", "This form is stale or came from another site: reload the page and try again.")
		return
	}
	tok, _ := io.ReadAll(io.LimitReader(part, 256))
	if !sameToken(string(tok), sessionOf(r).csrf) {
		u.errorPage(w, r, http.StatusForbidden, "Refused", "This form is stale or came from another site: reload the page and try again.")
		return
	}
	if part, err = mr.NextPart(); err != nil || part.FormName() != "file" {
		fail(http.StatusBadRequest, "Choose a file to import.")
		return
	}
	ctype := "text/csv"
	if mt, _, _ := mime.ParseMediaType(part.Header.Get("Content-Type")); mt == "application/json" || mt == "application/x-ndjson" {
		ctype = "application/x-ndjson"
	}
	in := apiRequest(r, http.MethodPost, "/api/v1/links/import", &deadlineReader{r: part, rc: http.NewResponseController(w)})
	in.Header.Set("Content-Type", ctype)
	lw := &lineWriter{answer: answer{header: http.Header{}}}
	var first []byte
	lw.fn = func(line []byte) {
		if first == nil {
			first = append([]byte(nil), line...)
		}
		var row struct {
			Row     int      `json:"row"`
			Status  int      `json:"status"`
			Done    bool     `json:"done"`
			Rows    int      `json:"rows"`
			Created int      `json:"created"`
			Failed  int      `json:"failed"`
			Problem *problem `json:"problem"`
		}
		if json.Unmarshal(line, &row) != nil {
			return
		}
		switch {
		case row.Done:
			d.Done, d.Rows, d.Created, d.Failed = true, row.Rows, row.Created, row.Failed
			if row.Problem != nil {
				d.Problem = "The import stopped: " + row.Problem.Error()
			}
		case row.Status >= 300 && len(d.Failures) < maxImportFailures && row.Problem != nil:
			d.Failures = append(d.Failures, "row "+strconv.Itoa(row.Row)+": "+row.Problem.Error())
		}
	}
	u.api.ServeHTTP(lw, in)
	if lw.status >= 400 {
		var p problem
		if json.Unmarshal(first, &p.Problem) == nil && p.Status != 0 {
			fail(lw.status, p.Error())
			return
		}
		fail(lw.status, "The import was refused.")
		return
	}
	status := http.StatusOK
	if !d.Done {
		d.Problem, status = "The import ended before its summary: see your links for what was stored.", http.StatusInternalServerError
	}
	u.render(w, r, status, "transfer", view{Title: "Import and export", Nav: "transfer", Data: d, Push: "/ui/transfer"})
}

// importReadTimeout is how long an upload may stall.
const importReadTimeout = 30 * time.Second

// deadlineReader moves the browser connection's read deadline on with
// every read, so a long upload is not cut by the server's ReadTimeout
// while a stalled one still is.
type deadlineReader struct {
	r  io.Reader
	rc *http.ResponseController
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	if err := d.rc.SetReadDeadline(time.Now().Add(importReadTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return 0, err
	}
	return d.r.Read(p)
}
