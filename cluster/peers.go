package cluster

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/peertls"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/peer"
	"github.com/linkraft/linkraft/transport"
)

// The node's side of the peer protocol (package peer): its handler of each
// operation, and the client it calls other nodes with. Forwarded writes,
// reads on a leader or replica, gathering and formation travel on the peer
// port; nothing internal is on the HTTP port.

// newPeerClient returns the client the node calls its peers with, over
// the peer port's mutual TLS (and the older JSON protocol for nodes of a
// version before the peer protocol).
func newPeerClient(mux *transport.Mux) *peer.Client {
	dial := func(kind transport.Kind) peer.Dialer {
		return func(ctx context.Context, addr string) (net.Conn, error) {
			return mux.Dial(ctx, addr, kind, 0, 2*time.Second)
		}
	}
	return peer.NewClient(peer.ClientConfig{Dial: dial(transport.KindPeer), DialLegacy: dial(transport.KindRPC)})
}

// servePeers answers the peer protocol, and the older one, on the layers
// until they close.
func (n *Node) servePeers(current, legacy *transport.Layer) {
	s := peer.NewServer(peer.ServerConfig{Logger: n.log.With("component", "peer")})
	peer.Handle(s, peer.OpApply, n.serveApply)
	peer.Handle(s, peer.OpLookup, n.serveLookup)
	peer.Handle(s, peer.OpClicks, n.serveClicks)
	peer.Handle(s, peer.OpVisits, n.serveVisits)
	peer.Handle(s, peer.OpOrphans, n.serveOrphans)
	peer.Handle(s, peer.OpList, n.serveList)
	peer.Handle(s, peer.OpTags, n.serveTags)
	peer.Handle(s, peer.OpPromise, n.servePromise)
	peer.Handle(s, peer.OpRelease, n.serveRelease)
	n.rpcWG.Go(func() { s.Serve(n.lifetime, current) })
	n.rpcWG.Go(func() { s.ServeLegacy(n.lifetime, legacy) })
}

// serveApply proposes a forwarded command (forwardable ones only) on its
// group's leader.
func (n *Node) serveApply(ctx context.Context, r *peer.ApplyRequest) (*peer.ApplyResponse, error) {
	if err := forwardable(r.Group, r.Command); err != nil {
		return nil, err
	}
	return n.applyGroup(ctx, r.Group, r.Command, r.Hops)
}

func (n *Node) serveLookup(ctx context.Context, r *peer.LookupRequest) (*peer.LinkResponse, error) {
	if err := n.knownShard(r.Shard); err != nil {
		return nil, err
	}
	l, err := n.lookupShard(ctx, r.Shard, r.Code, r.Consistent, r.Hops)
	if err != nil {
		return nil, err
	}
	return &peer.LinkResponse{Link: l}, nil
}

func (n *Node) serveClicks(_ context.Context, r *peer.ClicksRequest) (*peer.ClicksResponse, error) {
	sh := n.localShard(r.Shard)
	if sh == nil {
		return nil, fmt.Errorf("%w: shard %d is not hosted here", link.ErrUnavailable, r.Shard)
	}
	st, err := sh.FSM().Clicks(r.Code, r.From, r.To)
	if err != nil {
		return nil, err
	}
	return &peer.ClicksResponse{Stats: st}, nil
}

func (n *Node) serveVisits(_ context.Context, r *peer.VisitsRequest) (*peer.VisitsResponse, error) {
	v, err := n.localVisits(r.Code, r.From, r.To, r.Limit)
	if err != nil {
		return nil, err
	}
	return &peer.VisitsResponse{Visits: v}, nil
}

func (n *Node) serveOrphans(_ context.Context, r *peer.OrphansRequest) (*link.OrphanSummary, error) {
	o := n.localOrphans(r.Limit)
	return &o, nil
}

func (n *Node) serveTags(ctx context.Context, r *peer.TagsRequest) (*peer.TagsResponse, error) {
	if err := n.knownShard(r.Shard); err != nil {
		return nil, err
	}
	tags, err := n.tagsShard(ctx, r.Shard, r.Owner, r.Hops)
	if err != nil {
		return nil, err
	}
	return &peer.TagsResponse{Tags: tags}, nil
}

func (n *Node) servePromise(ctx context.Context, r *peer.PromiseRequest) (*peer.PromiseResponse, error) {
	answer, holder, err := n.promise(ctx, r.Proposer)
	if err != nil {
		return nil, err
	}
	return &peer.PromiseResponse{Answer: answer, Holder: holder}, nil
}

func (n *Node) serveRelease(_ context.Context, r *peer.ReleaseRequest) (*peer.ReleaseResponse, error) {
	return &peer.ReleaseResponse{Released: n.release(r.Promiser)}, nil
}

// knownShard refuses a shard id the cluster does not have.
func (n *Node) knownShard(s command.ShardID) error {
	if s < 0 || int(s) >= n.ring.Shards() {
		return fmt.Errorf("%w: no shard %d", link.ErrInvalidInput, s)
	}
	return nil
}

// verifyPeerRPC holds a Raft request to the node ID that its connection's
// certificate names: a member may speak only for itself.
func verifyPeerRPC(conn net.Conn, h raft.RPCHeader) error {
	id, ok := peertls.PeerNodeID(transport.PeerConn(conn))
	if !ok {
		return fmt.Errorf("%w: connection is not authenticated", peertls.ErrPeer)
	}
	if string(h.ID) != id {
		return fmt.Errorf("%w: certificate of %q sent a request as %q", peertls.ErrPeer, id, h.ID)
	}
	return nil
}

// forwardable refuses, on the RPC, the commands no node ever forwards: the
// cluster settings and the member registry are written by the meta leader
// itself (ensureSettings, admit), so a peer asking for them is not a
// linknode doing its job. What may be forwarded (shard commands, ID leases,
// placements) is then decoded and validated like any proposal.
func forwardable(group command.GroupID, cmd []byte) error {
	if group != command.MetaGroup || len(cmd) == 0 {
		return nil
	}
	switch t := command.Type(cmd[0]); t {
	case command.TypeSetSettings, command.TypeRegisterNode, command.TypeAdmitNode:
		return fmt.Errorf("%w: %s commands are not taken over the RPC", link.ErrInvalidInput, command.Name(t))
	case command.TypeCreateKey:
		// Keys made through the API may be forwarded; the first admin
		// key is made by the meta leader itself.
		if command.IsFirstKey(cmd) {
			return fmt.Errorf("%w: the first admin key is not taken over the RPC", link.ErrInvalidInput)
		}
	}
	return nil
}
