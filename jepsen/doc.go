// Package jepsen is linkraft's chaos harness: it starts a real linknode
// cluster — one process per node, each in its own network namespace — runs
// concurrent client workloads against it while a nemesis partitions,
// kills, pauses and drops packets, records every operation, heals, reads
// the final state, and checks the history (package checker). Results go to
// store/<test>/<timestamp>/ in a layout Jepsen users will recognise.
//
// The command is jepsen/cmd/jepsen; JEPSEN.md at the repository root
// explains the runs and what they found.
package jepsen
