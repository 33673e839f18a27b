package cluster_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/internal/testcluster"
	"github.com/linkraft/linkraft/link"
)

// TestNodeOwnsItsClickPipeline: a node opened with analytics counts the
// clicks recorded on its pipeline through the shard's Raft group, and its
// Close submits what is still pending before the groups stop: a restarted
// node has every click. Without analytics the node has no pipeline but
// still tells bots apart.
func TestNodeOwnsItsClickPipeline(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := testcluster.Key(t)
	cfg := cluster.Config{DataDir: dir, Shards: 2, ClusterKey: key,
		Analytics: &cluster.AnalyticsConfig{Visits: true, FlushInterval: time.Hour}} // no flush but Close's
	n := testcluster.Node(t, cfg)
	l, err := n.Links().Create(ctx(t), link.CreateRequest{URL: "https://clicks.example/", Alias: "counted", Redirect: link.DefaultRedirect})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if !n.Analytics().Recorder().Record(link.Click{Code: l.Code, Time: time.Now(), IP: netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}), UA: "Mozilla/5.0 Firefox/130.0"}) {
			t.Fatal("click dropped")
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = testcluster.Node(t, cfg)
	defer n.Close()
	got, err := n.Analytics().ClickCount(ctx(t), l.Code)
	if err != nil || got != 3 {
		t.Fatalf("clicks after a restart: %d, %v; want 3", got, err)
	}
	if !n.Analytics().IsBot("Slackbot-LinkExpanding 1.0") || n.Analytics().IsBot("Mozilla/5.0 Firefox/130.0") {
		t.Fatal("IsBot")
	}
	off := testcluster.Node(t, cluster.Config{DataDir: t.TempDir(), Shards: 2})
	defer off.Close()
	if off.Analytics().Recorder() != nil || !off.Analytics().IsBot("Slackbot-LinkExpanding 1.0") {
		t.Fatal("a node without analytics has a pipeline, or no bot detection")
	}
}
