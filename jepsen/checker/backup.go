package checker

import (
	"fmt"
	"slices"
	"strings"

	"github.com/linkraft/linkraft/jepsen/history"
)

// The backup check's history entries (nemesis process): an attempt to
// take the run's backup through a node, and its end (OK, or Fail with the
// reason).
const (
	FBackupStart = "backup-start"
	FBackupDone  = "backup-done"
)

// BackupState is the backup taken during the run, restored into a fresh
// node after it: what the backup checker judges.
type BackupState struct {
	// File is the backup ("" when none could be taken); Errors are the
	// attempts that failed, by node.
	File   string   `json:"file,omitempty"`
	Errors []string `json:"errors,omitempty"`
	// Restore is linknode restore's summary; RestoreError says why the
	// file could not be restored.
	Restore      string `json:"restore,omitempty"`
	RestoreError string `json:"restore_error,omitempty"`
	// Resolves[code] is GET /{code} on the restored node.
	Resolves map[string]Read `json:"resolves,omitempty"`
	// Issued are the codes the restored node made for new creates;
	// IssueErrors counts the creates it refused or left unanswered.
	Issued      []string `json:"issued,omitempty"`
	IssueErrors int      `json:"issue_errors,omitempty"`
}

// backupWorkloads make links with generated codes and never change or
// delete them: each acknowledged create must be in a later backup as made.
var backupWorkloads = []string{"set", "unique-ids", "ryw"}

// CheckBackup holds the restored backup to the history: every create of a
// generated code acknowledged before the successful backup began must
// redirect to its URL on the restored node (missing: lost-in-backup;
// another URL: wrong-url-in-backup), and no code the restored node makes
// for a new link may be one the backup holds or one acknowledged before it
// began (reissued): the backup's ID leases must carry over. (A code the
// first cluster issued after the backup is not in it, and the restored
// cluster, a copy of the first as of the backup, may make it again.) A
// file that was taken but cannot be restored is invalid; a run in which no
// backup could be taken is unknown.
func CheckBackup(ops []history.Op, b *BackupState) Result {
	res := Result{Checker: "backup", Stats: map[string]int{}}
	if b == nil {
		res.Valid, res.Summary = Unknown, "no backup was attempted"
		return res
	}
	res.Stats["failed_attempts"] = len(b.Errors)
	var start int64 = -1
	var lastStart int64
	for _, op := range ops {
		if op.Process != history.NemesisProcess {
			continue
		}
		switch {
		case op.F == FBackupStart:
			lastStart = op.Time
		case op.F == FBackupDone && op.Type == history.OK:
			start = lastStart
		}
	}
	switch {
	case b.File == "" || start < 0:
		res.Valid = Unknown
		res.Summary = fmt.Sprintf("no backup could be taken during the run (%d attempts): %s", len(b.Errors), strings.Join(lastN(b.Errors, 3), "; "))
		return res
	case b.RestoreError != "":
		res.Valid = Invalid
		res.Summary = "the backup taken during the run could not be restored into a fresh node: " + b.RestoreError
		return res
	}
	pairs, err := history.Pairs(ops)
	if err != nil {
		res.Valid, res.Summary = Unknown, err.Error()
		return res
	}
	before := map[string]bool{}
	for _, p := range pairs {
		if !slices.Contains(backupWorkloads, p.Invoke.Workload) || p.Invoke.F != FCreate || p.Completion == nil ||
			p.Completion.Type != history.OK || p.Completion.Time >= start {
			continue
		}
		res.Stats["acknowledged_before"]++
		code, url := p.Completion.Key, p.Invoke.Value
		before[code] = true
		rd, ok := b.Resolves[code]
		switch {
		case !ok || rd.Error != "":
			res.Stats["unread"]++
		case isRedirect(rd.Status) && rd.Location == url:
			res.Stats["restored"]++
		case isRedirect(rd.Status):
			res.add(Anomaly{Kind: "wrong-url-in-backup", Detail: fmt.Sprintf("%s was created as %s (acknowledged at %d ns, the backup began at %d ns); the restored node redirects to %s",
				code, url, p.Completion.Time, start, rd.Location), Ops: []history.Op{p.Invoke, *p.Completion}})
		default:
			res.add(Anomaly{Kind: "lost-in-backup", Detail: fmt.Sprintf("%s (%s) was acknowledged at %d ns, before the backup began at %d ns; the restored node answers %d",
				code, url, p.Completion.Time, start, rd.Status), Ops: []history.Op{p.Invoke, *p.Completion}})
		}
	}
	for _, rd := range b.Resolves {
		if rd.Error == "" && (isRedirect(rd.Status) || rd.Status == 410) {
			res.Stats["held_by_restored"]++
		}
	}
	for _, code := range b.Issued {
		res.Stats["issued_after_restore"]++
		rd := b.Resolves[code]
		if before[code] || (rd.Error == "" && (isRedirect(rd.Status) || rd.Status == 410)) {
			res.add(Anomaly{Kind: "reissued", Detail: fmt.Sprintf("the restored node made %s for a new link, a code the backup holds (it answered %d before)", code, rd.Status)})
		}
	}
	if b.IssueErrors > 0 {
		res.add(Anomaly{Kind: "restored-refuses-creates", Detail: fmt.Sprintf("the restored node refused or left unanswered %d of %d creates", b.IssueErrors, b.IssueErrors+len(b.Issued))})
	}
	switch {
	case res.AnomalyCount > 0:
		res.Valid = Invalid
		res.Summary = fmt.Sprintf("%d anomalies in the restored backup (%d creates acknowledged before it began)", res.AnomalyCount, res.Stats["acknowledged_before"])
	case res.Stats["unread"] > 0:
		res.Valid = Unknown
		res.Summary = fmt.Sprintf("%d of %d codes could not be read on the restored node", res.Stats["unread"], res.Stats["acknowledged_before"])
	case res.Stats["acknowledged_before"] == 0 || len(b.Issued) == 0:
		res.Valid = Unknown
		res.Summary = fmt.Sprintf("nothing to hold the backup to (%d creates acknowledged before it, %d codes issued after the restore)", res.Stats["acknowledged_before"], len(b.Issued))
	default:
		res.Valid = Valid
		res.Summary = fmt.Sprintf("all %d creates acknowledged before the backup began redirect as made on a fresh node restored from it; its %d new codes are all new",
			res.Stats["acknowledged_before"], len(b.Issued))
	}
	return res
}

// lastN is the last n of s.
func lastN(s []string, n int) []string {
	return s[max(0, len(s)-n):]
}
