// Package idrange turns globally unique integer IDs into short codes and
// hands IDs out of ranges leased through the meta Raft group.
//
// IDs are unique because the meta FSM owns the next free ID and hands out
// disjoint ranges ([start, start+n)) through Raft before any ID of a range is
// used. A node that crashes simply never uses the rest of its range. Codes are
// unique because the mapping from ID to code is a bijection: base62 of the ID
// itself (sequential mode) or of a keyed permutation of it (permuted mode, a
// Feistel network over [0, 62^7) with cycle walking).
package idrange
