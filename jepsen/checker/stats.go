package checker

import (
	"fmt"
	"sort"

	"github.com/linkraft/linkraft/jepsen/history"
)

// CheckStats counts completions per workload and operation (Jepsen's stats
// checker). A workload none of whose operations succeeded did not test
// anything, so the verdict is then unknown.
func CheckStats(ops []history.Op) Result {
	res := Result{Checker: "stats", Stats: map[string]int{}}
	okBy := map[string]int{}
	for _, op := range ops {
		if op.Process == history.NemesisProcess || op.Type == history.Invoke {
			continue
		}
		res.Stats[fmt.Sprintf("%s/%s/%s", op.Workload, op.F, op.Type)]++
		if op.Type == history.OK {
			okBy[op.Workload]++
		} else if _, seen := okBy[op.Workload]; !seen {
			okBy[op.Workload] = 0
		}
	}
	var idle []string
	for w, n := range okBy {
		if n == 0 {
			idle = append(idle, w)
		}
	}
	sort.Strings(idle)
	switch {
	case len(okBy) == 0:
		res.Valid, res.Summary = Unknown, "no client operation completed"
	case len(idle) > 0:
		res.Valid, res.Summary = Unknown, fmt.Sprintf("workloads with no successful operation: %v", idle)
	default:
		res.Summary = fmt.Sprintf("every workload had successful operations (%d workloads)", len(okBy))
	}
	return res
}
