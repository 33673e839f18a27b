package checker

import (
	"fmt"
	"sort"
	"strings"
)

// FaultRecord is one fault the nemesis tried, and what it shows of its
// effect.
type FaultRecord struct {
	Fault string `json:"fault"`
	// Start and End are seconds since the test began.
	Start float64 `json:"start"`
	End   float64 `json:"end,omitempty"`
	// Detail says what was done ("SIGKILL n2", "[n1 n2] | [n3 n4 n5]").
	Detail string `json:"detail,omitempty"`
	// Injected: the fault was put in force.
	Injected bool `json:"injected"`
	// Effective: the fault is shown to have taken effect (packets dropped,
	// processes stopped or killed).
	Effective bool `json:"effective"`
	// Effect is the evidence ("dropped 512 packets", "n2 stopped (state
	// T)", "n2 killed by SIGKILL").
	Effect string `json:"effect,omitempty"`
	// NoTarget: the fault could not find what it aims at (no node reports
	// leading a shard) and was not injected.
	NoTarget bool `json:"no_target,omitempty"`
	// Error says why the fault failed (a target process not running).
	Error string `json:"error,omitempty"`
	// Breach: a hostile fault's attack got an answer from a node (the
	// trust boundary failed).
	Breach bool `json:"breach,omitempty"`
	// Legit, for a flood, is what the workloads' clients saw while it was
	// in force.
	Legit *LegitTraffic `json:"legit,omitempty"`
}

// LegitTraffic is the workloads' operations invoked while a fault was in
// force: how many, how many did not succeed (failed or unknown), and
// their 99th-percentile latency beside that of every other operation of
// the run.
type LegitTraffic struct {
	Ops          int     `json:"ops"`
	Errors       int     `json:"errors"`
	ErrorRate    float64 `json:"error_rate"`
	P99MS        float64 `json:"p99_ms"`
	P99MSOutside float64 `json:"p99_ms_outside"`
	// ErrorRateOutside is the error rate of every other operation of the
	// run (some fail by design: a read of a deleted code).
	ErrorRateOutside float64 `json:"error_rate_outside"`
}

// FaultSummary is one kind of fault over a run.
type FaultSummary struct {
	Injected  int `json:"injected"`
	Effective int `json:"effective"`
	NoTarget  int `json:"no_target,omitempty"`
	Failed    int `json:"failed,omitempty"`
	// Effects are the evidence of the first few.
	Effects []string `json:"effects,omitempty"`
}

// SummarizeFaults groups fault records by kind.
func SummarizeFaults(records []FaultRecord) map[string]FaultSummary {
	out := map[string]FaultSummary{}
	for _, r := range records {
		s := out[r.Fault]
		switch {
		case r.NoTarget:
			s.NoTarget++
		case r.Error != "" && !r.Injected:
			s.Failed++
		}
		if r.Injected {
			s.Injected++
		}
		if r.Effective {
			s.Effective++
		}
		if r.Effect != "" && len(s.Effects) < 5 {
			s.Effects = append(s.Effects, r.Effect)
		}
		out[r.Fault] = s
	}
	return out
}

// CheckNemesis checks that the faults happened: a run whose nemesis was
// asked for faults but put none in force that showed an effect tested
// nothing, and its verdict is unknown. Faults that found no target, failed,
// or showed no effect are counted.
func CheckNemesis(requested []string, records []FaultRecord) Result {
	res := Result{Checker: "nemesis", Stats: map[string]int{}}
	sum := SummarizeFaults(records)
	kinds := make([]string, 0, len(sum))
	for k, s := range sum {
		kinds = append(kinds, k)
		res.Stats["injected"] += s.Injected
		res.Stats["effective"] += s.Effective
		res.Stats["no-target"] += s.NoTarget
		res.Stats["failed"] += s.Failed
	}
	sort.Strings(kinds)
	var desc []string
	for _, k := range kinds {
		s := sum[k]
		desc = append(desc, fmt.Sprintf("%s %d/%d", k, s.Effective, s.Injected))
	}
	var breaches []string
	for _, r := range records {
		if r.Breach {
			breaches = append(breaches, r.Effect)
		}
	}
	switch {
	case len(breaches) > 0:
		res.Valid = Invalid
		res.Anomalies = append(res.Anomalies, Anomaly{Kind: "breach", Detail: strings.Join(breaches, "; ")})
		res.Summary = fmt.Sprintf("a stranger's traffic got an answer %d time(s): %s", len(breaches), strings.Join(breaches, "; "))
	case len(requested) == 0:
		res.Summary = "no faults were asked for"
	case res.Stats["effective"] == 0:
		res.Valid = Unknown
		res.Summary = fmt.Sprintf("faults were asked for (%s) but none took effect (%d tried): the run tested nothing under faults",
			strings.Join(requested, " "), len(records))
	default:
		res.Summary = fmt.Sprintf("%d of %d faults took effect (effective/injected: %s; %d without a target, %d failed)",
			res.Stats["effective"], len(records), strings.Join(desc, ", "), res.Stats["no-target"], res.Stats["failed"])
	}
	return res
}
