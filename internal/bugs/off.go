//go:build !jepsenbugs

package bugs

// On reports whether the deliberate fault name is switched on: never, in a
// build without the jepsenbugs tag.
func On(string) bool { return false }

// Once reports whether the fault name is on and this is the first call for
// it in the process: never, in a build without the jepsenbugs tag.
func Once(string) bool { return false }

// Every reports whether the fault name is on and this is an nth call for it
// in the process: never, in a build without the jepsenbugs tag.
func Every(string, uint64) bool { return false }
