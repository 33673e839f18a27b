// Package peer is the internal RPC between the nodes of a cluster, on the
// peer port (transport.KindPeer, inside the members' mutual TLS): forwarded
// writes, reads on a shard's leader or replica, the click and visit
// gathering, and the formation handshake.
//
// Every operation has one request and one response message, declared in
// ops.go with internal/wire as the Raft commands are, and pinned by
// testdata/messages.golden, so a change of their bytes is a change of the
// protocol that a reviewer sees. Adding an operation is an entry in ops.go
// (its id, messages and stub), its golden pin, and its handler where the
// node registers the others (Handle).
//
// On a connection, each message is a frame: a 4-byte big-endian length
// and a protobuf body of at most MaxFrame bytes. The client opens a
// connection with a hello (operation 0) and the server answers it; then
// the client sends requests one at a time, each an envelope (operation,
// time budget, request message), and the server answers each with an
// envelope (error code and detail, or the response message). An operation
// the server does not know is answered ErrUnsupported: the request did
// nothing, and the caller treats the peer as older (another replica, or
// the feature waits). A peer that closes the connection at the hello is of
// a version before this protocol: the client then speaks that version's
// JSON protocol to it (legacy.go), and the server answers it too, so a
// rolling upgrade keeps every node reachable.
package peer
