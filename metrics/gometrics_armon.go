//go:build !hashicorpmetrics

package metrics

import (
	"fmt"
	"time"

	armon "github.com/armon/go-metrics"
	armonprom "github.com/armon/go-metrics/prometheus"
)

// installCompat installs the armon/go-metrics sink that raft-boltdb reports
// to in builds without -tags hashicorpmetrics.
func (m *Metrics) installCompat() error {
	sink, err := armonprom.NewPrometheusSinkFrom(armonprom.PrometheusOpts{
		Expiration: 5 * time.Minute, Registerer: m.reg, Name: "linkraft_armon_sink",
	})
	if err != nil {
		return fmt.Errorf("metrics: armon go-metrics sink: %w", err)
	}
	cfg := armon.DefaultConfig("linkraft")
	cfg.EnableHostname = false
	cfg.EnableHostnameLabel = false
	cfg.EnableRuntimeMetrics = false
	_, err = armon.NewGlobal(cfg, sink)
	return err
}
