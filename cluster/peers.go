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
	h := peerHandlers{n}
	s := peer.NewServer(peer.ServerConfig{Logger: n.log.With("component", "peer")})
	peer.Handle(s, peer.OpApply, h.apply)
	peer.Handle(s, peer.OpLookup, h.lookup)
	peer.Handle(s, peer.OpClicks, h.clicks)
	peer.Handle(s, peer.OpVisits, h.visits)
	peer.Handle(s, peer.OpOrphans, h.orphans)
	peer.Handle(s, peer.OpList, h.list)
	peer.Handle(s, peer.OpTags, h.tags)
	peer.Handle(s, peer.OpPromise, h.promise)
	peer.Handle(s, peer.OpRelease, h.release)
	peer.Handle(s, peer.OpDump, h.dump)
	peer.Handle(s, peer.OpReadIndex, h.readIndex)
	peer.Handle(s, peer.OpApplied, h.applied)
	n.rpcWG.Go(func() { s.Serve(n.lifetime, current) })
	n.rpcWG.Go(func() { s.ServeLegacy(n.lifetime, legacy) })
}

// peerHandlers are the node's answers to the peer protocol's operations.
type peerHandlers struct{ n *Node }

// apply proposes a forwarded command (forwardable ones only) on its
// group's leader.
func (h peerHandlers) apply(ctx context.Context, r *peer.ApplyRequest) (*peer.ApplyResponse, error) {
	if err := forwardable(r.Group, r.Command); err != nil {
		return nil, err
	}
	return h.n.router.apply(ctx, r.Group, r.Command, r.Hops)
}

func (h peerHandlers) lookup(ctx context.Context, r *peer.LookupRequest) (*peer.LinkResponse, error) {
	if err := h.knownShard(r.Shard); err != nil {
		return nil, err
	}
	l, err := h.n.router.lookup(ctx, r.Shard, r.Code, r.Consistent, r.Hops)
	if err != nil {
		return nil, err
	}
	return &peer.LinkResponse{Link: l}, nil
}

func (h peerHandlers) clicks(_ context.Context, r *peer.ClicksRequest) (*peer.ClicksResponse, error) {
	sh := h.n.host.local(r.Shard)
	if sh == nil {
		return nil, fmt.Errorf("%w: shard %d is not hosted here", link.ErrUnavailable, r.Shard)
	}
	st, err := sh.Clicks(r.Code, r.From, r.To)
	if err != nil {
		return nil, err
	}
	return &peer.ClicksResponse{Stats: st}, nil
}

func (h peerHandlers) visits(_ context.Context, r *peer.VisitsRequest) (*peer.VisitsResponse, error) {
	v, err := h.n.clicks.visits(r.Code, r.From, r.To, r.Limit)
	if err != nil {
		return nil, err
	}
	return &peer.VisitsResponse{Visits: v}, nil
}

func (h peerHandlers) orphans(_ context.Context, r *peer.OrphansRequest) (*link.OrphanSummary, error) {
	o := h.n.clicks.orphans(r.Limit)
	return &o, nil
}

func (h peerHandlers) list(ctx context.Context, r *peer.ListRequest) (*peer.ListResponse, error) {
	if err := h.knownShard(r.Shard); err != nil {
		return nil, err
	}
	return h.n.links.serveList(ctx, r)
}

func (h peerHandlers) tags(ctx context.Context, r *peer.TagsRequest) (*peer.TagsResponse, error) {
	if err := h.knownShard(r.Shard); err != nil {
		return nil, err
	}
	tags, err := h.n.links.tagsShard(ctx, r.Shard, r.Owner, r.Hops)
	if err != nil {
		return nil, err
	}
	return &peer.TagsResponse{Tags: tags}, nil
}

func (h peerHandlers) dump(ctx context.Context, r *peer.DumpRequest) (*peer.DumpResponse, error) {
	if err := h.knownShard(r.Shard); err != nil {
		return nil, err
	}
	return h.n.links.dumpShard(ctx, r.Shard, r.After, r.Hops)
}

// readIndex answers a read point of a group this node leads.
func (h peerHandlers) readIndex(ctx context.Context, r *peer.ReadIndexRequest) (*peer.ReadIndexResponse, error) {
	g := h.n.host.group(r.Group)
	if g == nil {
		return nil, fmt.Errorf("%w: no replica of group %d here", link.ErrNotLeader, r.Group)
	}
	index, err := g.ReadIndex(ctx)
	if err != nil {
		return nil, err
	}
	return &peer.ReadIndexResponse{Index: index}, nil
}

func (h peerHandlers) promise(ctx context.Context, r *peer.PromiseRequest) (*peer.PromiseResponse, error) {
	answer, holder, err := h.n.formation.promise(ctx, r.Proposer)
	if err != nil {
		return nil, err
	}
	return &peer.PromiseResponse{Answer: answer, Holder: holder}, nil
}

func (h peerHandlers) release(_ context.Context, r *peer.ReleaseRequest) (*peer.ReleaseResponse, error) {
	return &peer.ReleaseResponse{Released: h.n.formation.release(r.Promiser)}, nil
}

// knownShard refuses a shard id the cluster does not have. The peer port
// serves while the node is still joining, before it knows the settings:
// then every shard is unavailable here.
func (h peerHandlers) knownShard(s command.ShardID) error {
	p := h.n.host.shards.Load()
	if p == nil {
		return fmt.Errorf("%w: node %s is starting", link.ErrUnavailable, h.n.cfg.NodeID)
	}
	if s < 0 || int(s) >= len(*p) {
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

// applied answers how far this node's replica of a group has applied.
func (h peerHandlers) applied(_ context.Context, r *peer.AppliedRequest) (*peer.AppliedResponse, error) {
	g := h.n.host.group(r.Group)
	if g == nil {
		return nil, fmt.Errorf("%w: no replica of group %d here", link.ErrNotFound, r.Group)
	}
	return &peer.AppliedResponse{Index: g.AppliedIndex()}, nil
}
