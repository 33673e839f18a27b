package metrics

import (
	"fmt"
	"time"

	gometrics "github.com/hashicorp/go-metrics"
	gmprom "github.com/hashicorp/go-metrics/prometheus"
)

// InstallRaftMetrics points go-metrics' process-global registry at a
// Prometheus sink in m's registry, so raft, raft-boltdb and memberlist
// metrics appear on /metrics. go-metrics is global by design, so only the
// process's main should call this, once; in-process test clusters do not.
//
// hashicorp/raft and memberlist report to hashicorp/go-metrics. raft-boltdb
// reports through go-metrics' compat package, which is armon/go-metrics
// unless the binary is built with -tags hashicorpmetrics; without the tag a
// second sink is installed for it (installCompat), so the metrics are
// complete either way.
func (m *Metrics) InstallRaftMetrics() error {
	sink, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{
		Expiration: 5 * time.Minute, Registerer: m.reg, Name: "linkraft_gometrics_sink",
	})
	if err != nil {
		return fmt.Errorf("metrics: go-metrics sink: %w", err)
	}
	cfg := gometrics.DefaultConfig("linkraft")
	cfg.EnableHostname = false
	cfg.EnableHostnameLabel = false
	cfg.EnableRuntimeMetrics = false // the Go collector covers the runtime
	if _, err := gometrics.NewGlobal(cfg, sink); err != nil {
		return err
	}
	return m.installCompat()
}
