//go:build jepsenbugs

package raftgroup

import "github.com/linkraft/linkraft/internal/bugs"

// faultLogNoSync (log-nosync): the log store commits without fdatasync.
func faultLogNoSync() bool { return bugs.On(bugs.LogNoSync) }
