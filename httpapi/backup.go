package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/linkraft/linkraft/internal/backup"
)

// MaxRestoreBytes bounds a backup sent to POST /admin/v1/restore: it is
// spooled to the node's data dir before anything is written.
const MaxRestoreBytes = 64 << 30

// transferIdle bounds a backup's or a restore's wait for the client to
// take or send the next bytes (the admin listener's 30 s read timeout
// would otherwise cut any file that takes longer).
const transferIdle = 30 * time.Second

// handleBackup serves GET /admin/v1/backup: the whole cluster as one file
// (package backup's format), streamed as it is read. A failure before the
// first byte is a problem document; one after it ends the stream early,
// without the manifest, which a restore refuses.
func (s *Server) handleBackup(w http.ResponseWriter, r *http.Request) {
	out := &lazyStream{w: w, rc: http.NewResponseController(w), name: "linkraft-" + time.Now().UTC().Format("20060102T150405Z") + ".lrbk"}
	man, err := s.admin.Backup(r.Context(), out)
	switch {
	case err != nil && !out.started:
		s.Error(w, r, err)
	case err != nil:
		s.log.Error("backup cut short", "err", err, "bytes", out.n)
		panic(http.ErrAbortHandler) // the client sees a broken stream, not a clean end
	default:
		var records uint64
		for _, sh := range man.Shards {
			records += sh.Records
		}
		s.log.Info("backup sent", "bytes", out.n, "records", records, "keys", man.Keys, "blocked", man.Blocked)
	}
}

// lazyStream sends the response head with its first bytes, and pushes the
// write deadline on with each write.
type lazyStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	name    string
	started bool
	n       int64
}

func (l *lazyStream) Write(p []byte) (int, error) {
	if !l.started {
		l.started = true
		h := l.w.Header()
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Disposition", `attachment; filename="`+l.name+`"`)
		h.Set("Cache-Control", "no-store")
		l.w.WriteHeader(http.StatusOK)
	}
	_ = l.rc.SetWriteDeadline(time.Now().Add(transferIdle))
	n, err := l.w.Write(p)
	l.n += int64(n)
	return n, err
}

// handleRestore serves POST /admin/v1/restore: the body is a backup, put
// into this cluster (cluster.Admin.Restore). ?resume=true goes on with a
// restore that was cut short. 200 with what it did; 422 for a file that is
// not a whole backup (nothing written), 409 for a cluster that holds links.
func (s *Server) handleRestore(w http.ResponseWriter, r *http.Request) {
	resume := false
	if v := r.URL.Query().Get("resume"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			s.problemField(w, r, http.StatusBadRequest, "invalid-input", "Bad Request", "resume must be true or false", "resume")
			return
		}
		resume = b
	}
	body := &idleReader{r: http.MaxBytesReader(w, r.Body, MaxRestoreBytes), rc: http.NewResponseController(w)}
	rep, err := s.admin.Restore(r.Context(), body, resume)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		s.problem(w, r, http.StatusRequestEntityTooLarge, "too-large", "Content Too Large", fmt.Sprintf("a backup sent here is at most %d bytes", int64(MaxRestoreBytes)))
	case errors.Is(err, backup.ErrNotBackup), errors.Is(err, backup.ErrDamaged), errors.Is(err, backup.ErrTruncated), errors.Is(err, backup.ErrNewerFormat):
		s.problem(w, r, http.StatusUnprocessableEntity, "bad-backup", "Unprocessable Content", err.Error()+"; nothing was restored")
	case errors.Is(err, backup.ErrNotEmpty):
		s.problem(w, r, http.StatusConflict, "cluster-not-empty", "Conflict", err.Error())
	case err != nil:
		s.Error(w, r, err)
	default:
		s.log.Info("backup restored", "links", rep.Links, "present", rep.Present, "conflicts", rep.ConflictCount, "keys", rep.Keys, "blocked", rep.Blocked)
		writeJSON(w, r, http.StatusOK, restoreJSON(rep))
	}
}

// restoreJSON is a restore's report as the API shows it.
func restoreJSON(rep *backup.Report) map[string]any {
	conflicts := rep.Conflicts
	if conflicts == nil {
		conflicts = []string{}
	}
	return map[string]any{
		"backup": map[string]any{"cluster_id": rep.Source.ClusterID, "created_at": rep.Source.CreatedAt, "node": rep.Source.Node,
			"version": rep.Source.Version},
		"links": rep.Links, "present": rep.Present, "conflicts": rep.ConflictCount, "conflicting_codes": conflicts,
		"keys": rep.Keys, "blocked_domains": rep.Blocked, "next_id": rep.NextID,
	}
}

// idleReader pushes the read deadline on with each read, so that a large
// upload is bounded by its pauses rather than by its length.
type idleReader struct {
	r  io.Reader
	rc *http.ResponseController
}

func (i *idleReader) Read(p []byte) (int, error) {
	_ = i.rc.SetReadDeadline(time.Now().Add(transferIdle))
	return i.r.Read(p)
}
