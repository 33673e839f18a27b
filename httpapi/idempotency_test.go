package httpapi_test

import (
	"strings"
	"testing"

	"github.com/linkraft/linkraft/link"
)

// TestIdempotencyKey on a real node: a create retried with its
// Idempotency-Key answers 201 with the same link (Idempotent-Replayed:
// true) and stores nothing new; the key with another body is 422 and
// stores nothing; a malformed key is 400; a bulk create with a key makes
// its links once; another key's owner never meets the key.
func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	tn := startNode(t, link.URLPolicy{})
	body := []byte(`{"url":"https://example.com/once","tags":["a"]}`)
	post := func(path string, body []byte, key ...string) response {
		hdr := []string{}
		if len(key) > 0 {
			hdr = append(hdr, "Idempotency-Key", key[0])
		}
		return tn.do(t, "POST", path, "application/json", body, hdr...)
	}
	first := post("/api/v1/links", body, `"6f1c5b7e-0b5e-4d1c-9c3b-1a2b3c4d5e6f"`)
	if first.status != 201 || first.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first: %d %v %s", first.status, first.header, first.body)
	}
	code := first.json(t)["code"]
	for _, key := range []string{`"6f1c5b7e-0b5e-4d1c-9c3b-1a2b3c4d5e6f"`, `6f1c5b7e-0b5e-4d1c-9c3b-1a2b3c4d5e6f`} {
		again := post("/api/v1/links", body, key)
		if again.status != 201 || again.json(t)["code"] != code || again.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry with %s: %d %v %s", key, again.status, again.header, again.body)
		}
	}
	before := tn.storedState(t)
	if n := strings.Count(before, "https://example.com/once"); n != 1 {
		t.Fatalf("%d links stored, want 1", n)
	}
	other := post("/api/v1/links", []byte(`{"url":"https://example.com/other"}`), "6f1c5b7e-0b5e-4d1c-9c3b-1a2b3c4d5e6f")
	if other.status != 422 || other.json(t)["type"] != "/problems/idempotency-key-reused" {
		t.Fatalf("another body: %d %s", other.status, other.body)
	}
	for _, bad := range []string{`""`, strings.Repeat("k", 256), "with space", "tab\there", "é"} {
		if r := post("/api/v1/links", body, bad); r.status != 400 || r.json(t)["type"] != "/problems/invalid-idempotency-key" {
			t.Errorf("key %q: %d %s", bad, r.status, r.body)
		}
	}
	// Another owner's key of the same value is another key: a new link,
	// not the first owner's.
	_, bob := tn.makeKey(t, "bob", "bob", "links:read", "links:write")
	tn.waitKey(t, bob)
	bobs := tn.do(t, "POST", "/api/v1/links", "application/json", body, "Idempotency-Key", "6f1c5b7e-0b5e-4d1c-9c3b-1a2b3c4d5e6f", "Authorization", bearer(bob))
	if bobs.status != 201 || bobs.json(t)["code"] == code || bobs.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("another owner, the same key: %d %v %s", bobs.status, bobs.header, bobs.body)
	}
	if after := tn.storedState(t); strings.Count(after, "https://example.com/") != strings.Count(before, "https://example.com/")+1 {
		t.Fatalf("refused requests stored links:\n%s", after)
	}

	// A password's fingerprint would be a fast hash of it: refused.
	if r := post("/api/v1/links", []byte(`{"url":"https://example.com/pw","password":"secret-pw"}`), "pw-key"); r.status != 400 || r.json(t)["field"] != "Idempotency-Key" {
		t.Fatalf("a password with a key: %d %s", r.status, r.body)
	}
	if r := post("/api/v1/links/bulk", []byte(`{"links":[{"url":"https://example.com/pw","password":"secret-pw"}]}`), "pw-key-2"); r.status != 400 {
		t.Fatalf("a bulk password with a key: %d %s", r.status, r.body)
	}
	bulk := []byte(`{"links":[{"url":"https://example.com/b1"},{"url":"javascript:alert(1)"},{"url":"https://example.com/b3","alias":"b-three"}]}`)
	b1 := post("/api/v1/links/bulk", bulk, "bulk-1")
	b2 := post("/api/v1/links/bulk", bulk, "bulk-1")
	if b1.status != 200 || b2.status != 200 || b2.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("bulk: %d %d %v", b1.status, b2.status, b2.header)
	}
	r1, r2 := b1.json(t)["results"].([]any), b2.json(t)["results"].([]any)
	for i := range r1 {
		a, b := r1[i].(map[string]any), r2[i].(map[string]any)
		if a["status"] != b["status"] || (a["link"] != nil && a["link"].(map[string]any)["code"] != b["link"].(map[string]any)["code"]) {
			t.Fatalf("bulk item %d: %v then %v", i, a, b)
		}
	}
	if r1[1].(map[string]any)["status"] != float64(400) || r1[2].(map[string]any)["link"].(map[string]any)["code"] != "b-three" {
		t.Fatalf("bulk results: %s", b1.body)
	}
	if n := strings.Count(tn.storedState(t), "https://example.com/b1"); n != 1 {
		t.Fatalf("bulk made b1 %d times", n)
	}
	if r := post("/api/v1/links/bulk", []byte(`{"links":[{"url":"https://example.com/b1"}]}`), "bulk-1"); r.status != 422 {
		t.Fatalf("bulk key with another body: %d %s", r.status, r.body)
	}
}
