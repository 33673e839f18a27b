package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/linkraft/linkraft/command"
)

func hex64(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// TestClaimsHoldForADayAndArePruned: the first claim of a key wins and is
// what every later claim of it answers (codes and body), until it expires;
// then the key may be claimed anew, and each new claim prunes a bounded
// number of expired ones.
func TestClaimsHoldForADayAndArePruned(t *testing.T) {
	f := mustShard(t, ShardConfig{})
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	idx := uint64(0)
	claim := func(key, body string, now time.Time, codes ...string) *command.ClaimResult {
		t.Helper()
		idx++
		out := applyAt(t, f, idx, (&command.ClaimKey{Key: hex64(key), Body: hex64(body), Codes: codes, Now: now}).Encode())
		r, ok := out.(*command.ClaimResult)
		if !ok {
			t.Fatalf("claim answered %T %v", out, out)
		}
		return r
	}
	first := claim("k1", "body", t0, "abc1234")
	if first.Existing || first.Codes[0] != "abc1234" || first.Body != hex64("body") || !first.Expires.Equal(t0.Add(24*time.Hour)) {
		t.Fatalf("first claim: %+v", first)
	}
	again := claim("k1", "other body", t0.Add(23*time.Hour), "zzz9999")
	if !again.Existing || again.Codes[0] != "abc1234" || again.Body != hex64("body") {
		t.Fatalf("a claim within the day must answer the first: %+v", again)
	}
	for i := range 20 {
		claim("filler"+string(rune('a'+i)), "b", t0.Add(time.Minute), "fill"+string(rune('a'+i)))
	}
	if n, _ := f.Claims(); n != 21 {
		t.Fatalf("%d claims, want 21", n)
	}
	later := t0.Add(25 * time.Hour)
	renewed := claim("k1", "new body", later, "new0001")
	if renewed.Existing || renewed.Codes[0] != "new0001" {
		t.Fatalf("after a day the key is free: %+v", renewed)
	}
	// That claim pruned the 8 oldest expired claims (k1's first, then 7
	// fillers) and made k1's anew: 13 fillers and k1.
	if n, _ := f.Claims(); n != 14 {
		t.Fatalf("%d claims after one pruning claim, want 14", n)
	}
	// k2's first claim prunes 8 more fillers, its second the last 5.
	for range 3 {
		if r := claim("k2", "b", later, "k2code1"); r.Codes[0] != "k2code1" {
			t.Fatalf("k2: %+v", r)
		}
	}
	if n, _ := f.Claims(); n != 2 {
		t.Fatalf("%d claims once the expired were pruned, want k1 and k2", n)
	}
}
