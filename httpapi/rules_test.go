package httpapi_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/linkraft/linkraft/analytics"
	"github.com/linkraft/linkraft/httpapi"
	"github.com/linkraft/linkraft/link"
)

// User-Agents and addresses of each kind (the addresses' countries as the
// embedded IP2Location data has them).
const (
	uaIPhone  = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1"
	uaAndroid = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36"
	uaDesktop = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
	ipDE      = "81.169.145.1"
	ipUS      = "8.8.8.8"
	ipFR      = "212.27.48.10"
)

// TestRedirectRules: each dimension (device from the User-Agent, country
// from the client address, language from Accept-Language), first match
// wins over a later, more specific rule, no match is the link's URL; the
// fast path (a fresh connection) and net/http answer alike, with
// Cache-Control: no-store, and the query is forwarded onto the rule's URL.
func TestRedirectRules(t *testing.T) {
	t.Parallel()
	tn := startFake(t, link.URLPolicy{}, func(c *httpapi.Config) {
		c.Analytics = enriched{c.Analytics, analytics.NewEnricher()}
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	made := tn.create(t, `{"url":"https://example.com/default","alias":"app","rules":[
		{"device":"ios","country":"de","url":"https://example.com/ios-de"},
		{"device":"ios","url":"https://apps.apple.example/app"},
		{"device":"android","url":"https://play.example/app"},
		{"language":"fr","url":"https://example.com/fr"},
		{"country":"DE","language":"de","url":"https://example.com/de-de"},
		{"device":"desktop","country":"US","url":"https://example.com/us-desktop"}]}`)
	rules, _ := made["rules"].([]any)
	if len(rules) != 6 || fmt.Sprint(rules[0]) != "map[country:DE device:ios url:https://example.com/ios-de]" {
		t.Fatalf("rules as stored: %v", made["rules"])
	}
	cases := []struct {
		name, ua, ip, lang, want string
	}{
		{"iPhone in Germany: the first rule, not the second", uaIPhone, ipDE, "de", "https://example.com/ios-de"},
		{"iPhone elsewhere", uaIPhone, ipUS, "fr", "https://apps.apple.example/app"},
		{"Android", uaAndroid, ipDE, "de", "https://play.example/app"},
		{"desktop, French first", uaDesktop, ipUS, "fr-CA,en;q=0.8", "https://example.com/fr"},
		{"desktop, French second", uaDesktop, ipFR, "en,fr;q=0.8", "https://example.com/default"},
		{"desktop in Germany, German", uaDesktop, ipDE, "de-DE", "https://example.com/de-de"},
		{"desktop in Germany, English", uaDesktop, ipDE, "en", "https://example.com/default"},
		{"desktop in the US", uaDesktop, ipUS, "", "https://example.com/us-desktop"},
		{"no User-Agent in the US", "", ipUS, "", "https://example.com/default"},
		{"a bot in the US", "Googlebot/2.1 (+http://www.google.com/bot.html)", ipUS, "", "https://example.com/default"},
	}
	addr := strings.TrimPrefix(tn.srv.URL, "http://")
	for _, c := range cases {
		hdr := []string{"Authorization", "", "X-Forwarded-For", c.ip}
		raw := "GET /app?utm_source=qr HTTP/1.1\r\nHost: sho.rt\r\nX-Forwarded-For: " + c.ip + "\r\n"
		if c.ua != "" {
			hdr = append(hdr, "User-Agent", c.ua)
			raw += "User-Agent: " + c.ua + "\r\n"
		} else {
			hdr = append(hdr, "User-Agent", "")
		}
		if c.lang != "" {
			hdr = append(hdr, "Accept-Language", c.lang)
			raw += "Accept-Language: " + c.lang + "\r\n"
		}
		want := c.want + "?utm_source=qr"
		r := tn.do(t, "GET", "/app?utm_source=qr", "", nil, hdr...)
		if r.status != 302 || r.header.Get("Location") != want || r.header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: %d %s %q, want %s", c.name, r.status, r.header.Get("Location"), r.header.Get("Cache-Control"), want)
		}
		served, _ := tn.fast.Stats()
		got := exchange(t, addr, raw+"\r\n", "GET")
		if len(got) != 1 || !strings.Contains(got[0], "\nLocation: "+want+"\n") || !strings.Contains(got[0], "\nCache-Control: no-store\n") {
			t.Errorf("%s, fast path: %q, want Location %s", c.name, got, want)
		}
		if now, _ := tn.fast.Stats(); now != served+1 {
			t.Errorf("%s: a link with rules left the fast path", c.name)
		}
	}

	// Limits and bad rules: 400 naming the rule, nothing stored.
	many := strings.Repeat(`{"country":"DE","url":"https://e.example/"},`, link.MaxRules)
	for body, field := range map[string]string{
		`{"url":"https://e.example/","rules":[` + many + `{"country":"FR","url":"https://e.example/"}]}`: "rules",
		`{"url":"https://e.example/","rules":[{"url":"https://e.example/x"}]}`:                           "rules[0].device",
		`{"url":"https://e.example/","rules":[{"device":"iphone","url":"https://e.example/x"}]}`:         "rules[0].device",
		`{"url":"https://e.example/","rules":[{"country":"Germany","url":"https://e.example/x"}]}`:       "rules[0].country",
		`{"url":"https://e.example/","rules":[{"language":"fr_FR","url":"https://e.example/x"}]}`:        "rules[0].language",
		`{"url":"https://e.example/","rules":[{"device":"ios","url":"javascript:alert(1)"}]}`:            "rules[0].url",
		`{"url":"https://e.example/","rules":[{"device":"ios"}]}`:                                        "rules[0].url",
		`{"url":"https://e.example/","rules":[{"device":"ios","url":"https://e.example/","os":"x"}]}`:    "os",
		`{"url":"https://e.example/","rules":{"device":"ios"}}`:                                          "rules",
	} {
		r := tn.postJSON(t, "/api/v1/links", body)
		if r.status != 400 || r.json(t)["field"] != field {
			t.Errorf("create %.90s: %d %s, want 400 on %s", body, r.status, r.body, field)
		}
	}
	if r := tn.postJSON(t, "/api/v1/links", `{"url":"https://e.example/","rules":[`+strings.TrimSuffix(many, ",")+`]}`); r.status != 201 {
		t.Fatalf("20 rules: %d %s", r.status, r.body)
	}

	// A patch replaces the rules; null removes them (and the answer is
	// cacheable again).
	patch := func(body string) response {
		return tn.do(t, "PATCH", "/api/v1/links/app", "application/merge-patch+json", []byte(body))
	}
	if r := patch(`{"rules":[{"device":"iphone","url":"https://e.example/"}]}`); r.status != 400 || r.json(t)["field"] != "rules[0].device" {
		t.Fatalf("a bad patch: %d %s", r.status, r.body)
	}
	if r := patch(`{"rules":[{"language":"de","url":"https://example.com/only-de"}]}`); r.status != 200 || len(r.json(t)["rules"].([]any)) != 1 {
		t.Fatalf("replace: %d %s", r.status, r.body)
	}
	if r := tn.do(t, "GET", "/app", "", nil, "Authorization", "", "User-Agent", uaIPhone, "Accept-Language", "de"); r.header.Get("Location") != "https://example.com/only-de" {
		t.Fatalf("after the patch: %v", r.header)
	}
	if r := patch(`{"rules":null}`); r.status != 200 || fmt.Sprint(r.json(t)["rules"]) != "[]" {
		t.Fatalf("remove: %d %s", r.status, r.body)
	}
	if r := tn.do(t, "GET", "/app", "", nil, "Authorization", "", "Accept-Language", "de"); r.header.Get("Location") != "https://example.com/default" ||
		r.header.Get("Cache-Control") != "private, max-age=90" {
		t.Fatalf("without rules: %v", r.header)
	}

	// A blocked domain in any rule takes the whole link down, for every
	// visitor, on both paths.
	tn.create(t, `{"url":"https://fine.example/","alias":"smuggle","rules":[{"country":"US","url":"https://phish.example/login"}]}`)
	if r := tn.postJSON(t, "/api/v1/blocklist", `{"domain":"phish.example"}`); r.status != 201 {
		t.Fatalf("block: %d %s", r.status, r.body)
	}
	for _, ip := range []string{ipUS, ipDE} {
		if r := tn.do(t, "GET", "/smuggle", "", nil, "Authorization", "", "X-Forwarded-For", ip); r.status != 410 {
			t.Fatalf("a link with a blocked rule URL, from %s: %d %v", ip, r.status, r.header)
		}
		if got := exchange(t, addr, "GET /smuggle HTTP/1.1\r\nHost: sho.rt\r\nX-Forwarded-For: "+ip+"\r\n\r\n", "GET"); len(got) != 1 || !strings.HasPrefix(got[0], "HTTP/1.1 410") {
			t.Fatalf("the same on a fresh connection: %q", got)
		}
	}
	if r := tn.do(t, "GET", "/api/v1/links/smuggle", "", nil); r.json(t)["blocked"] != true {
		t.Fatalf("the link JSON: %s", r.body)
	}
}
