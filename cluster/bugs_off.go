//go:build !jepsenbugs

package cluster

// bugs are deliberate faults for the chaos harness's own tests; in normal
// builds every switch is off and compiles away.
type bugs struct{}

func loadBugs() bugs { return bugs{} }

func (bugs) followerRead() bool { return false }
func (bugs) earlyAck() bool     { return false }
func (bugs) noLease() bool      { return false }
func (bugs) clickDouble() bool  { return false }
