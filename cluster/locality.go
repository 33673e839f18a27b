package cluster

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/idrange"
)

// Generated codes that commit where they are created.
//
// A create goes to its code's shard leader. When the node that took the
// request leads that shard, the create is one Raft commit; otherwise it
// is forwarded first, a peer round trip on both nodes (on three nodes,
// two creates in three). A generated code can be any code, so the node
// prefers one whose shard it leads: it takes IDs until one's code falls on
// such a shard (at most maxLocalDraws), and skips the IDs it passed over,
// as a crashed node's unused remainder is skipped. Fixed-length codes are
// 62^7 (3.5×10^12) of them, so using one ID in three costs nothing anyone
// sees; sequential codes are kept short and take every ID in turn.
//
// On more than one node the node narrows the preference further, to a
// focus: one shard in eight, rounded up (one of 8 shards, two of 16), of
// those it leads, the next ones in turn each localEvery. A create's Raft
// entry is replicated by its group, one AppendEntries in flight to each
// follower; creates spread over every group a node leads make that many
// small batches, each an RPC both ends pay for, where one group at a time
// batches them together (3 nodes: 1.09× the creates at 11 % less CPU a
// create, BENCHMARKS.md issue 28 session 9). It skips up to about eight
// IDs a code instead of three (the meta group leases IDs that much more
// often), still nothing anyone sees. A node that no longer leads its
// focus (an election) prefers every eligible shard it leads until the
// next turn. One node alone keeps every shard it leads: nothing is
// replicated there, and nothing was gained.
//
// The node prefers only shards whose state is not much larger than the
// mean of all shards (localSlackRatio, localSlackBytes), so a node that
// takes every create (one entry point, a single client) does not pile the
// links onto the shards it leads; and only when it hosts a replica of
// every link shard, so it can compare them all and what it picks does not
// move data between nodes (on three nodes with three replicas every node
// holds every link anyway). Aliases go to their shard wherever it is led,
// as before.
const (
	// maxLocalDraws bounds the IDs one generated code may take looking
	// for a shard led here: with a focus of one shard in eight (or more),
	// at most one code in 70 misses it.
	maxLocalDraws = 32
	// focusShare is the share of the link shards a focus holds: one in
	// focusShare, rounded up.
	focusShare = 8
	// localEvery is how often the shards eligible for local codes are
	// measured again.
	localEvery = time.Second
	// localSlack: a shard is eligible while its state is at most
	// localSlackRatio times the mean plus localSlackBytes.
	localSlackRatio = 1.25
	localSlackBytes = 64 << 20
)

// locality keeps which link shards this node may prefer for generated
// codes (by their state's size), measured at most every localEvery, and
// its focus among them.
type locality struct {
	mu       sync.Mutex // one measurement at a time
	measured atomic.Int64
	pref     atomic.Pointer[preference]
	turn     int // the focus's turns so far (under mu)
}

// preference is one measurement: by shard id, the shards eligible (nil:
// no preference), and the focus among those led here (nil: none).
type preference struct {
	eligible, focus []bool
}

// preferred returns, by shard id, the shards whose codes this node may
// prefer and its focus among them (nil for none), measuring them again
// when the last measurement is older than localEvery.
func (lc *locality) preferred(n *Node) (eligible, focus []bool) {
	last := func() ([]bool, []bool) {
		if p := lc.pref.Load(); p != nil {
			return p.eligible, p.focus
		}
		return nil, nil
	}
	fresh := func() bool { return time.Now().UnixNano()-lc.measured.Load() < int64(localEvery) }
	// Measured lately, or another create is measuring: use what there is.
	if fresh() || !lc.mu.TryLock() {
		return last()
	}
	defer lc.mu.Unlock()
	if fresh() { // another create measured between the check and the lock
		return last()
	}
	el := eligibleHere(n)
	var fo []bool
	if el != nil && n.admin.LiveNodes() > 1 {
		var led []int
		for s, ok := range el {
			if ok && n.leadsShard(command.ShardID(s)) {
				led = append(led, s)
			}
		}
		fo = focusOf(led, len(el), lc.turn)
		lc.turn++
	}
	lc.pref.Store(&preference{eligible: el, focus: fo})
	lc.measured.Store(time.Now().UnixNano())
	return el, fo
}

// focusOf returns, by shard id (of shards in all), the focus of turn: one
// in focusShare of the shards (rounded up), taken in turn from led, the
// eligible shards led here (all of them if they are fewer). Nil when led
// is empty.
func focusOf(led []int, shards, turn int) []bool {
	if len(led) == 0 {
		return nil
	}
	k := min((shards+focusShare-1)/focusShare, len(led))
	out := make([]bool, shards)
	for i := range k {
		out[led[(turn*k+i)%len(led)]] = true
	}
	return out
}

// eligibleHere returns, by shard id, the shards eligible by size (nil:
// this node does not host every link shard, or codes are sequential).
func eligibleHere(n *Node) []bool {
	var el []bool
	if n.host.coder.Mode() != idrange.ModeSequential {
		if p := n.host.shards.Load(); p != nil {
			sizes := make([]int64, len(*p))
			all := len(*p) > 0
			for i, s := range *p {
				if s == nil {
					all = false
					break
				}
				sizes[i] = s.StateSize()
			}
			if all {
				el = eligibleBySize(sizes)
			}
		}
	}
	return el
}

// eligibleBySize returns which shards are within localSlackRatio of the
// mean size plus localSlackBytes.
func eligibleBySize(sizes []int64) []bool {
	if len(sizes) == 0 {
		return nil
	}
	var sum float64
	for _, s := range sizes {
		sum += float64(s)
	}
	limit := sum/float64(len(sizes))*localSlackRatio + localSlackBytes
	out := make([]bool, len(sizes))
	for i, s := range sizes {
		out[i] = float64(s) <= limit
	}
	return out
}

// preferLocal reports whether code's shard is eligible and led here.
func (n *Node) preferLocal(eligible []bool, code string) bool {
	s := n.host.locate(code)
	return int(s) < len(eligible) && eligible[s] && n.leadsShard(s)
}

// leadsAny reports whether this node leads one of the eligible shards.
func (n *Node) leadsAny(eligible []bool) bool {
	for s, ok := range eligible {
		if ok && n.leadsShard(command.ShardID(s)) {
			return true
		}
	}
	return false
}

// leadsShard reports whether this node leads shard s's group now.
func (n *Node) leadsShard(s command.ShardID) bool {
	g := n.host.group(s.Group())
	return g != nil && g.IsLeader()
}
