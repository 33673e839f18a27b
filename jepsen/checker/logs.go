package checker

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// badLogLines are the node-log lines that make a run invalid whatever the
// clients saw (Jepsen's log-file-pattern checker).
var badLogLines = []string{"panic:", "fatal error:", "WARNING: DATA RACE", "panic in handler", "SIGSEGV"}

// CheckLogs scans node logs (name -> path) for panics, fatal errors and
// data races.
func CheckLogs(logs map[string]string) Result {
	res := Result{Checker: "logs", Stats: map[string]int{}}
	for name, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			res.add(Anomaly{Kind: "unreadable-log", Detail: err.Error()})
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		line := 0
		for sc.Scan() {
			line++
			res.Stats["lines"]++
			for _, pat := range badLogLines {
				if strings.Contains(sc.Text(), pat) {
					res.add(Anomaly{Kind: "log-pattern", Detail: fmt.Sprintf("%s (%s:%d): %s", name, filepath.Base(path), line, strings.TrimSpace(sc.Text()))})
					break
				}
			}
		}
		f.Close()
	}
	if res.AnomalyCount > 0 {
		res.Valid = Invalid
		res.Summary = fmt.Sprintf("%d panics, fatal errors or data races in node logs", res.AnomalyCount)
	} else {
		res.Summary = fmt.Sprintf("%d log lines from %d nodes, no panics, fatal errors or data races", res.Stats["lines"], len(logs))
	}
	return res
}
