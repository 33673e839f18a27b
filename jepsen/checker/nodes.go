package checker

import (
	"fmt"
	"strings"
)

// Why the harness expected a node process to end (NodeRun.Cause).
const (
	// CauseNemesis: the nemesis sent SIGKILL.
	CauseNemesis = "nemesis"
	// CauseStop: the harness sent SIGTERM at the end of the run; the
	// process must exit with status 0 within the grace period.
	CauseStop = "stop"
	// CauseStopTimeout: the process outlived the grace period after
	// SIGTERM, and the harness sent SIGKILL.
	CauseStopTimeout = "stop-timeout"
	// CauseRestart: the nemesis sent SIGTERM to restart the node (the
	// rolling-restart fault); the process must exit with status 0.
	CauseRestart = "restart"
)

// NodeRun is one start of a node's process and how it ended.
type NodeRun struct {
	Node string `json:"node"`
	// Run counts the node's starts, from 1.
	Run int `json:"run"`
	PID int `json:"pid,omitempty"`
	// Started, Stopping (SIGTERM sent, at the end of the run) and Ended are
	// nanoseconds since the test began.
	Started  int64 `json:"started"`
	Stopping int64 `json:"stopping,omitempty"`
	Ended    int64 `json:"ended,omitempty"`
	// StartError is set when the process could not be started.
	StartError string `json:"start_error,omitempty"`
	// Exited says the process has ended; ExitCode (-1 when killed by a
	// signal) and Signal ("killed", "terminated", ...) say how.
	Exited   bool   `json:"exited"`
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	// Cause is why the harness expected the end ("" when it did not).
	Cause string `json:"cause,omitempty"`
	// LastLog holds the last lines the process wrote before an unexpected
	// end.
	LastLog []string `json:"last_log,omitempty"`
}

// How says how the process ended.
func (r NodeRun) How() string {
	if r.Signal != "" {
		return "killed by signal " + r.Signal
	}
	return fmt.Sprintf("exit status %d", r.ExitCode)
}

// CheckNodes checks node health from the process records: every start
// succeeded, no process ended unless the nemesis killed it or the harness
// stopped it, and every stop was clean (status 0 within the grace period).
// A process that died on its own is invalid even if no client noticed.
func CheckNodes(runs []NodeRun) Result {
	res := Result{Checker: "nodes", Stats: map[string]int{}}
	for _, r := range runs {
		res.Stats["starts"]++
		name := fmt.Sprintf("%s (start #%d, pid %d)", r.Node, r.Run, r.PID)
		switch {
		case r.StartError != "":
			res.add(Anomaly{Kind: "start-failed", Detail: fmt.Sprintf("%s: %s", name, r.StartError)})
		case !r.Exited:
			res.Stats["still-running"]++
		case r.Cause == CauseNemesis && r.Signal == "killed":
			res.Stats["killed-by-nemesis"]++
		case r.Cause == CauseStop && r.Signal == "" && r.ExitCode == 0:
			res.Stats["stopped-cleanly"]++
			if r.Stopping > 0 {
				ms := int((r.Ended - r.Stopping) / 1e6)
				res.Stats["slowest-stop-ms"] = max(res.Stats["slowest-stop-ms"], ms)
				if ms > 10_000 {
					res.Stats["stops-over-10s"]++ // linknode's default budget
				}
			}
		case r.Cause == CauseRestart && r.Signal == "" && r.ExitCode == 0:
			res.Stats["restarted-cleanly"]++
		case r.Cause == CauseStop || r.Cause == CauseRestart:
			res.add(Anomaly{Kind: "unclean-shutdown", Detail: fmt.Sprintf("%s ended with %s after SIGTERM", name, r.How())})
		case r.Cause == CauseStopTimeout:
			res.add(Anomaly{Kind: "shutdown-hung", Detail: fmt.Sprintf("%s did not exit within the grace period after SIGTERM and was killed (SIGQUIT first: its log ends with every goroutine's stack)", name)})
		default:
			res.add(Anomaly{Kind: "unexpected-exit", Detail: fmt.Sprintf("%s ended on its own at %.3fs with %s; last log lines: %s",
				name, float64(r.Ended)/1e9, r.How(), strings.Join(r.LastLog, " | "))})
		}
	}
	switch {
	case res.AnomalyCount > 0:
		res.Valid = Invalid
		res.Summary = fmt.Sprintf("%d node processes failed to start or ended when nobody ended them", res.AnomalyCount)
	case res.Stats["starts"] == 0:
		res.Valid = Unknown
		res.Summary = "no node process was started"
	default:
		res.Summary = fmt.Sprintf("%d starts: %d killed by the nemesis, %d restarted cleanly by it, %d stopped cleanly at the end (the slowest in %.1fs; %d over 10s), none died on its own",
			res.Stats["starts"], res.Stats["killed-by-nemesis"], res.Stats["restarted-cleanly"], res.Stats["stopped-cleanly"], float64(res.Stats["slowest-stop-ms"])/1000, res.Stats["stops-over-10s"])
	}
	return res
}
