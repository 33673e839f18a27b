//go:build !jepsencrash

package crashpoint

import "log/slog"

// Hit marks crash point name (a no-op without -tags jepsencrash).
func Hit(string) {}

// Listen arms crash points on SIGUSR2 (a no-op without -tags jepsencrash).
func Listen(*slog.Logger) {}

// Built reports whether this binary has the crash points.
const Built = false
