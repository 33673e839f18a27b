package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/linkraft/linkraft/internal/backup"
	"github.com/linkraft/linkraft/internal/status"
	"github.com/linkraft/linkraft/link"
)

// errNoRole answers the routes of a role the server was built without.
var errNoRole = fmt.Errorf("%w: not served by this node", link.ErrUnavailable)

// noAdmin stands in for a missing Admin role: a node of one, always ready.
type noAdmin struct{}

func (noAdmin) Status() status.Cluster                   { return status.Cluster{} }
func (noAdmin) Ready(context.Context) error              { return nil }
func (noAdmin) RemoveNode(context.Context, string) error { return status.ErrUnknownNode }
func (noAdmin) DrainNode(context.Context, string, bool) error {
	return status.ErrUnknownNode
}
func (noAdmin) DrainStatus(string) (bool, int, error)     { return false, 0, status.ErrUnknownNode }
func (noAdmin) Leases() ([]status.Lease, error)           { return nil, errNoRole }
func (noAdmin) Digests() ([]status.Digest, error)         { return nil, errNoRole }
func (noAdmin) ForEachLink(func(l *link.Link) bool) error { return errNoRole }
func (noAdmin) LiveNodes() int                            { return 1 }
func (noAdmin) Backup(context.Context, io.Writer) (*backup.Manifest, error) {
	return nil, errNoRole
}
func (noAdmin) Restore(context.Context, io.Reader, bool) (*backup.Report, error) {
	return nil, errNoRole
}

// noAnalytics stands in for a missing Analytics role: no statistics, no
// bots, no devices or countries for rules.
type noAnalytics struct{}

func (noAnalytics) Stats(context.Context, string, link.StatsQuery) (*link.Link, *link.Stats, error) {
	return nil, nil, link.ErrNotFound
}
func (noAnalytics) ClickCount(context.Context, string) (uint64, error) { return 0, nil }
func (noAnalytics) Visits(context.Context, string, time.Time, time.Time, int) ([]link.Visit, link.Gathered, error) {
	return []link.Visit{}, link.Gathered{}, nil
}
func (noAnalytics) Orphans(context.Context, int) (link.OrphanSummary, link.Gathered) {
	return link.OrphanSummary{Top: []link.CodeCount{}}, link.Gathered{}
}
func (noAnalytics) IsBot(string) bool         { return false }
func (noAnalytics) Platform(string) string    { return "" }
func (noAnalytics) Country(netip.Addr) string { return "unknown" }
