package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linkraft/linkraft/command"
)

// Who a node is, beyond its ID. Each data dir has an incarnation, a random
// ID made with it; the meta group registers every member's incarnation
// (fsm/members.go) and its cluster ID is in the settings. The meta leader
// takes a gossip member into the cluster only if it is new or comes back
// with the incarnation on record, and only if its state, if any, is of
// this cluster. Every peer-port handshake checks the peer certificate's
// incarnation against the registry as well, so a node that lost its state
// cannot speak in any group under its old ID (it might vote twice in a
// term it forgot). A refused node is told why through gossip, logs it at
// ERROR, and its /readyz says it.

// admission decides who the cluster takes in, and keeps why this node was
// refused, if it was.
type admission struct {
	n       *Node
	refused atomic.Pointer[string]
	logged  refusalLog
}

// ErrRefused is wrapped by the reasons a node is refused.
var ErrRefused = errors.New("refused by the cluster")

// loadIncarnation reads the data dir's incarnation, making it on first
// start (a data dir from before incarnations gets one now, and is
// registered with it).
func loadIncarnation(dataDir string) (string, error) {
	p := filepath.Join(dataDir, "incarnation")
	b, err := os.ReadFile(p)
	if err == nil {
		if inc := strings.TrimSpace(string(b)); inc != "" {
			return inc, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	var r [16]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	inc := hex.EncodeToString(r[:])
	if err := writeFileSync(p, []byte(inc+"\n")); err != nil {
		return "", err
	}
	return inc, nil
}

// verifyPeer is the peer-port handshake's check (internal/peertls): a
// peer whose certificate names a registered node ID with another
// incarnation is refused.
func (a *admission) verifyPeer(id, inc string) error {
	m := a.n.registry.Load()
	if inc == "" || m == nil {
		return nil // an operator's certificate, or before the meta group opened
	}
	rec, ok, err := m.Member(id)
	if err != nil || !ok || rec.Incarnation == inc {
		return nil
	}
	return amnesia(id, inc, rec.Incarnation)
}

func amnesia(id, inc, reg string) error {
	return fmt.Errorf("%w: node %s came back with a new data dir (incarnation %s; the cluster knows %s). It may have lost votes and writes: remove the old node (linknode remove %s) and start this one under a new -node-id",
		ErrRefused, id, short(inc), short(reg), id)
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// admit decides whether the meta leader takes gossip member m into the
// cluster, registering its incarnation the first time. A refusal is
// logged (at most once a minute per node) and sent to m.
func (a *admission) admit(ctx context.Context, m Member) error {
	n := a.n
	err := a.check(ctx, m)
	if err != nil && errors.Is(err, ErrRefused) {
		if a.logged.due(m.ID, err.Error()) {
			n.log.Error("node refused", "member", m.ID, "reason", err)
			n.gossip.refuse(m.ID, n.cfg.NodeID, err.Error())
		}
	}
	return err
}

func (a *admission) check(ctx context.Context, m Member) error {
	n := a.n
	own := n.meta.ClusterID()
	if m.Cluster != "" && own != "" && m.Cluster != own {
		return fmt.Errorf("%w: node %s holds the state of cluster %s, and this is cluster %s; it was started on another cluster's data dir (or with this cluster's key by mistake)",
			ErrRefused, m.ID, m.Cluster, own)
	}
	if m.Incarnation == "" {
		return nil // a version without incarnations; registered once upgraded
	}
	// A node of a version without the registry would halt its meta group
	// at a RegisterNode entry (an unknown type to it): register no one
	// until every live member is of this version (a rolling upgrade).
	for _, o := range n.gossip.members() {
		if o.Alive && o.Incarnation == "" {
			return nil
		}
	}
	if m.ID == n.cfg.NodeID && m.Incarnation != n.incarnation {
		return fmt.Errorf("%w: gossip shows this node's ID with another incarnation", ErrRefused)
	}
	rec, ok, err := n.meta.Member(m.ID)
	if err != nil {
		return err
	}
	if ok && rec.Incarnation != m.Incarnation {
		return amnesia(m.ID, m.Incarnation, rec.Incarnation)
	}
	// Once every live member knows AdmitNode, the registry records each
	// node's level as well, and again whenever it changes (an upgrade, or
	// a rollback).
	admit := n.clusterAt(levelAdmit) && m.Level > 0
	if ok && rec.Level > m.Level && m.Level < levelAdmit && a.logged.due(m.ID, "rolled back") {
		// It could not apply an AdmitNode: its recorded level stays, and
		// only the live check holds fields back while it runs.
		n.log.Error("node rolled back to a version from before feature levels were recorded: links with a password or rules are refused while it is live, but those it already holds are served by it without them; upgrade it again",
			"member", m.ID, "level", m.Level, "recorded", rec.Level)
	}
	if ok && (!admit || rec.Level == m.Level) {
		return nil
	}
	entry := (&command.RegisterNode{Node: m.ID, Incarnation: m.Incarnation, At: time.Now().UTC()}).Encode()
	if admit {
		entry = (&command.AdmitNode{Member: command.RegisterNode{Node: m.ID, Incarnation: m.Incarnation, At: time.Now().UTC(), Level: uint32(m.Level)}}).Encode()
	}
	out, _, err := n.meta.Group().Apply(ctx, entry)
	if err != nil {
		return err
	}
	switch r := out.(type) {
	case *command.RegisterResult:
		if errors.Is(r.Err, command.ErrIncarnation) {
			return amnesia(m.ID, m.Incarnation, r.Incarnation)
		}
		switch {
		case r.Err != nil:
		case !ok:
			n.log.Info("node registered", "member", m.ID, "incarnation", short(m.Incarnation), "level", m.Level)
		case rec.Level > m.Level:
			n.log.Warn("node came back at a lower feature level (rolled back): fields it cannot keep wait until it is upgraded again; links with them already stored on it are served by it without them",
				"member", m.ID, "level", m.Level, "was", rec.Level)
		default:
			n.log.Info("node feature level recorded", "member", m.ID, "level", m.Level, "was", rec.Level)
		}
		return r.Err
	case error:
		return r
	}
	return fmt.Errorf("register %s: unexpected response %T", m.ID, out)
}

// refusedBy records a refusal another node sent this one.
func (a *admission) refusedBy(from, reason string) {
	prev := a.refused.Swap(&reason)
	if prev == nil || *prev != reason || a.logged.due("self", reason) {
		a.n.log.Error("this node was refused by the cluster", "by", from, "reason", reason)
	}
}

// refusal returns why the cluster refused this node, or "".
func (a *admission) refusal() string {
	if r := a.refused.Load(); r != nil {
		return *r
	}
	return ""
}

// refusalLog rate-limits refusal logs: once a minute per node and reason.
type refusalLog struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func (l *refusalLog) due(id, reason string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = map[string]time.Time{}
	}
	k := id + "\x00" + reason
	if t, ok := l.last[k]; ok && time.Since(t) < time.Minute {
		return false
	}
	l.last[k] = time.Now()
	return true
}

// startup says what Open is waiting for, and what keeps a join from
// happening.
type startup struct {
	what atomic.Pointer[string]
	note atomic.Pointer[string] // the join loop's trouble, added to it
}

func (s *startup) set(what string) { s.what.Store(&what) }

// setNote adds note to what Open waits for ("" removes it).
func (s *startup) setNote(note string) {
	if note == "" {
		s.note.Store(nil)
		return
	}
	s.note.Store(&note)
}

func (s *startup) get() string {
	out := ""
	if p := s.what.Load(); p != nil {
		out = *p
	}
	if p := s.note.Load(); p != nil {
		out += "; " + *p
	}
	return out
}
