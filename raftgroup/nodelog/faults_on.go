//go:build jepsenbugs

package nodelog

import "github.com/linkraft/linkraft/internal/bugs"

// faultNoSync (log-nosync): the log commits without fdatasync.
func faultNoSync() bool { return bugs.On(bugs.LogNoSync) }
