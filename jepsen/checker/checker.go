// Package checker decides whether a chaos-test history is valid. Each
// checker looks at one guarantee — linearizable registers, no lost or
// unexpected creates, unique codes and leases, read-your-writes across
// nodes, clean node logs — and reports valid true, false or unknown with
// the operations that show the problem.
package checker

import (
	"encoding/json"
	"fmt"

	"github.com/linkraft/linkraft/jepsen/history"
)

// Validity is a checker's verdict: true, false or unknown (Jepsen's
// :valid?). It encodes as JSON true, false or "unknown".
type Validity int

// The verdicts, ordered so that merging takes the maximum.
const (
	Valid Validity = iota
	Unknown
	Invalid
)

func (v Validity) String() string {
	switch v {
	case Valid:
		return "true"
	case Invalid:
		return "false"
	}
	return "unknown"
}

// MarshalJSON encodes true, false or "unknown".
func (v Validity) MarshalJSON() ([]byte, error) {
	switch v {
	case Valid:
		return []byte("true"), nil
	case Invalid:
		return []byte("false"), nil
	}
	return []byte(`"unknown"`), nil
}

// UnmarshalJSON decodes what MarshalJSON wrote.
func (v *Validity) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "true":
		*v = Valid
	case "false":
		*v = Invalid
	case `"unknown"`:
		*v = Unknown
	default:
		return fmt.Errorf("validity %s: want true, false or \"unknown\"", b)
	}
	return nil
}

// Merge is Jepsen's merge-valid: false beats unknown beats true.
func Merge(vs ...Validity) Validity {
	out := Valid
	for _, v := range vs {
		out = max(out, v)
	}
	return out
}

// Anomaly is one thing a checker found wrong.
type Anomaly struct {
	Kind   string       `json:"kind"`
	Detail string       `json:"detail"`
	Ops    []history.Op `json:"ops,omitempty"`
}

// maxListed bounds the anomalies a result lists (all are counted).
const maxListed = 50

// Result is one checker's report.
type Result struct {
	Checker   string         `json:"checker"`
	Valid     Validity       `json:"valid"`
	Summary   string         `json:"summary"`
	Stats     map[string]int `json:"stats,omitempty"`
	Anomalies []Anomaly      `json:"anomalies,omitempty"`
	// AnomalyCount counts all anomalies, listed or not.
	AnomalyCount int `json:"anomaly_count"`
}

func (r *Result) add(a Anomaly) {
	r.AnomalyCount++
	if len(r.Anomalies) < maxListed {
		r.Anomalies = append(r.Anomalies, a)
	}
}

// Final is what the harness read after healing every fault and waiting for
// the cluster to recover.
type Final struct {
	// Nodes are the node IDs, in order.
	Nodes []string `json:"nodes"`
	// Resolves[node][code] is GET /{code} on that node.
	Resolves map[string]map[string]Read `json:"resolves"`
	// Links[node] is that node's GET /admin/v1/links.
	Links map[string][]Listed `json:"links"`
	// APIListed[node] is GET /api/v1/links through that node, every page:
	// what users see of the cluster's links (each shard read on its
	// leader).
	APIListed map[string][]Listed `json:"api_listed,omitempty"`
	// Leases[node] is that node's GET /admin/v1/leases: every grant its
	// meta replica applied.
	Leases map[string][]Lease `json:"leases"`
	// Digests[node] is that node's GET /admin/v1/digest, once the replicas
	// had settled (or the wait for them ended: DigestsSettled false).
	Digests        map[string][]GroupDigest `json:"digests,omitempty"`
	DigestsSettled bool                     `json:"digests_settled"`
	// Replicas[group] are the group's members by the Raft configuration a
	// node reports (the meta group: every node).
	Replicas map[string][]string `json:"replicas,omitempty"`
	// Truth[code] is a linearizable read of each register code
	// (?consistent=true): Status 200 with the URL in Location, 404
	// (unknown) or 410 (deleted).
	Truth map[string]Read `json:"truth"`
	// Counters[node][code] is the final click count each node reports for
	// the counter workload's codes.
	Counters map[string]map[string]uint64 `json:"counters,omitempty"`
	// Recovered says whether every node reported ready before the reads
	// and answered them.
	Recovered bool `json:"recovered"`
	// ReadErrors are the final reads that failed as a whole (a listing).
	ReadErrors []string `json:"read_errors,omitempty"`
	// Backup is the backup taken during the run, restored into a fresh
	// node (nil: the run took none).
	Backup *BackupState `json:"backup,omitempty"`
}

// Read is one final resolve.
type Read struct {
	Status   int    `json:"status,omitempty"`
	Location string `json:"location,omitempty"`
	Error    string `json:"error,omitempty"`
}

// Listed is one link in a node's listing.
type Listed struct {
	Code    string `json:"code"`
	URL     string `json:"url"`
	Deleted bool   `json:"deleted,omitempty"`
}

// Lease is an ID range granted by the meta group, by its log entry at
// Index (0 for grants recorded before indexes were).
type Lease struct {
	Index uint64 `json:"index,omitempty"`
	Start uint64 `json:"start"`
	End   uint64 `json:"end"`
	Node  string `json:"node"`
}

// GroupDigest is a node's digest of its replica of one group (GET
// /admin/v1/digest): the applied index and a hash of the state as of it.
type GroupDigest struct {
	Group        string `json:"group"`
	AppliedIndex uint64 `json:"applied_index"`
	Items        int    `json:"items"`
	Digest       string `json:"digest"`
}

// pretty is for error details.
func pretty(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
