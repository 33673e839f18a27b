package transport

import (
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// RaftLayer adapts a Layer to raft.StreamLayer, whose Dial takes a
// raft.ServerAddress.
type RaftLayer struct{ *Layer }

// Dial implements raft.StreamLayer.
func (r RaftLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return r.Layer.Dial(string(address), timeout)
}

var _ raft.StreamLayer = RaftLayer{}
