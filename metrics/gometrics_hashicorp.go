//go:build hashicorpmetrics

package metrics

// installCompat is a no-op with -tags hashicorpmetrics: raft-boltdb's compat
// package then reports to hashicorp/go-metrics like raft does.
func (m *Metrics) installCompat() error { return nil }
