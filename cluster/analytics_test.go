package cluster

import (
	"net/netip"
	"testing"
	"time"

	"github.com/linkraft/linkraft/link"
)

// TestNodeOwnsItsClickPipeline: a node opened with analytics counts the
// clicks recorded on its pipeline through the shard's Raft group, and its
// Close submits what is still pending before the groups stop: a restarted
// node has every click. Without analytics the node has no pipeline but
// still tells bots apart.
func TestNodeOwnsItsClickPipeline(t *testing.T) {
	dir := t.TempDir()
	key := testKey(t)
	cfg := Config{DataDir: dir, Shards: 2, ClusterKey: key,
		Analytics: &AnalyticsConfig{Visits: true, FlushInterval: time.Hour}} // no flush but Close's
	n := openNode(t, cfg)
	l, err := n.Create(ctx(t), link.CreateRequest{URL: "https://clicks.example/", Alias: "counted", Redirect: link.DefaultRedirect})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if !n.Clicks().Record(link.Click{Code: l.Code, Time: time.Now(), IP: netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}), UA: "Mozilla/5.0 Firefox/130.0"}) {
			t.Fatal("click dropped")
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = openNode(t, cfg)
	defer n.Close()
	got, err := n.ClickCount(ctx(t), l.Code)
	if err != nil || got != 3 {
		t.Fatalf("clicks after a restart: %d, %v; want 3", got, err)
	}
	if !n.IsBot("Slackbot-LinkExpanding 1.0") || n.IsBot("Mozilla/5.0 Firefox/130.0") {
		t.Fatal("IsBot")
	}
	off := openNode(t, Config{DataDir: t.TempDir(), Shards: 2})
	defer off.Close()
	if off.Clicks() != nil || !off.IsBot("Slackbot-LinkExpanding 1.0") {
		t.Fatal("a node without analytics has a pipeline, or no bot detection")
	}
}
