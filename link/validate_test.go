package link

import (
	"errors"
	"strings"
	"testing"
)

func TestNormalizeURL(t *testing.T) {
	t.Parallel()
	p := URLPolicy{OwnHosts: []string{"sho.rt", "Bücher.example", "198.51.100.7"}, Blocklist: map[string]struct{}{"evil.example": {}, "203.0.113.9": {}}}
	ok := map[string]string{
		"https://example.com":                  "https://example.com",
		"HTTPS://Example.COM/Path?Q=1#frag":    "https://example.com/Path?Q=1#frag",
		"http://example.com:8080/a%20b":        "http://example.com:8080/a%20b",
		"https://bücher.de/straße":             "https://xn--bcher-kva.de/stra%C3%9Fe",
		"https://[2001:db8::1]:443/x":          "https://[2001:db8::1]:443/x",
		"https://192.0.2.1/":                   "https://192.0.2.1/",
		"https://notevil.example/":             "https://notevil.example/",
		"https://example.com/?next=http://x.y": "https://example.com/?next=http://x.y",
	}
	for in, want := range ok {
		got, err := p.NormalizeURL(in)
		if err != nil || got != want {
			t.Errorf("NormalizeURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	bad := []string{
		"", "javascript:alert(1)", "JavaScript:alert(1)", "data:text/html,hi", "ftp://example.com/", "file:///etc/passwd",
		"https://bank.com@evil.example", "https://user:pw@example.com/", "https:///path", "https:", "//example.com/x",
		"/relative", "example.com", "https://exa mple.com/", "https://example.com/\r\nSet-Cookie: a=b",
		"https://example.com/\x00", "https://example.com/\u202e", "https://sho.rt/abc", "https://SHO.RT/abc",
		"https://evil.example/", "https://sub.evil.example/x", "https://example.com:/", "http://[::1", "https://exa\tmple.com",
		"https://" + strings.Repeat("a", DefaultMaxURLLength) + ".com/",
		"http://127.0.0.1:8080/", "http://[::1]/", "http://localhost/", "http://app.localhost/", "http://0.0.0.0/",
		"http://2130706433/", "http://0x7f.1/", "http://127.1/", "http://1.2.3.0x4/",
		"http://¹", "http://１２７．０．０．１/", "http://１０．０．０．１/", "http://２１３０７０６４３３/", // digits IDNA maps to ASCII (found by FuzzNormalizeURL)
		"http://..", "http://./", "https://.example.com/", "https://a..b.example/", // empty labels (found by FuzzNormalizeURL)
		"https://0ü0000%80000000", "https://example%FF.com/", // an escaped byte that is no UTF-8 in the host (found by FuzzNormalizeURL)
		"https://xn--bcher-kva.example/", "https://bücher.example/", "https://198.51.100.7/", "https://203.0.113.9/",
	}
	for _, in := range bad {
		if got, err := p.NormalizeURL(in); !errors.Is(err, ErrInvalidURL) {
			t.Errorf("NormalizeURL(%q) = %q, %v; want ErrInvalidURL", in, got, err)
		}
	}
	short := URLPolicy{MaxLength: 30}
	if _, err := short.NormalizeURL("https://example.com/" + strings.Repeat("x", 20)); !errors.Is(err, ErrInvalidURL) {
		t.Errorf("length limit not applied: %v", err)
	}
}

func TestValidateAlias(t *testing.T) {
	t.Parallel()
	for _, a := range []string{"abc", "my-link", "A_b-9", strings.Repeat("x", 64)} {
		if err := ValidateAlias(a); err != nil {
			t.Errorf("ValidateAlias(%q) = %v", a, err)
		}
	}
	for _, a := range []string{"", "ab", strings.Repeat("x", 65), "a/b", "a b", "héllo", "a.b", "api", "API", "Admin", "metrics", "healthz", "readyz", "static", "internal"} {
		if err := ValidateAlias(a); !errors.Is(err, ErrInvalidAlias) {
			t.Errorf("ValidateAlias(%q) = %v, want ErrInvalidAlias", a, err)
		}
	}
}

func TestReadBlocklist(t *testing.T) {
	t.Parallel()
	bl, err := ReadBlocklist(strings.NewReader("# comment\n\nEvil.Example\n*.bad.example\nbücher.example\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"evil.example", "bad.example", "xn--bcher-kva.example"} {
		if _, ok := bl[d]; !ok {
			t.Errorf("%s missing from %v", d, bl)
		}
	}
	if _, err := ReadBlocklist(strings.NewReader("not a domain!\n")); err == nil {
		t.Error("invalid domain accepted")
	}
}

func TestValidateTags(t *testing.T) {
	t.Parallel()
	if err := ValidateTags([]string{"a", "b c"}); err != nil {
		t.Fatal(err)
	}
	many := make([]string, 33)
	for i := range many {
		many[i] = "t"
	}
	for _, tags := range [][]string{many, {""}, {strings.Repeat("x", 65)}, {"a\nb"}} {
		if err := ValidateTags(tags); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("ValidateTags(%q) = %v", tags, err)
		}
	}
}

func FuzzNormalizeURL(f *testing.F) {
	for _, s := range []string{"https://example.com/a?b#c", "javascript:x", "https://a@b", "http://[::1]:80/", "https://bücher.example"} {
		f.Add(s)
	}
	p := URLPolicy{}
	f.Fuzz(func(t *testing.T, raw string) {
		out, err := p.NormalizeURL(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalidURL) {
				t.Fatalf("error %v does not wrap ErrInvalidURL", err)
			}
			return
		}
		// What we store is itself valid, stable under normalisation, and
		// safe to put in a Location header.
		again, err := p.NormalizeURL(out)
		if err != nil || again != out {
			t.Fatalf("NormalizeURL(%q) = %q, which normalises to %q, %v", raw, out, again, err)
		}
		if !strings.HasPrefix(out, "http://") && !strings.HasPrefix(out, "https://") {
			t.Fatalf("stored %q", out)
		}
		if strings.ContainsAny(out, "\r\n\x00 ") {
			t.Fatalf("stored URL %q has control characters or spaces", out)
		}
	})
}

func FuzzValidateAlias(f *testing.F) {
	for _, s := range []string{"abc", "api", "a/b", "xx"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, a string) {
		if err := ValidateAlias(a); err != nil {
			if !errors.Is(err, ErrInvalidAlias) {
				t.Fatalf("error %v does not wrap ErrInvalidAlias", err)
			}
			return
		}
		if !ValidCode(a) || len(a) < MinAliasLength || IsReserved(a) {
			t.Fatalf("accepted alias %q", a)
		}
	})
}

func TestNormalizeURLRefusesPrivateTargets(t *testing.T) {
	t.Parallel()
	p := URLPolicy{OwnHosts: []string{"sho.rt"}, Blocked: func(h string) bool { return h == "takedown.example" }}
	private := []string{
		"http://10.0.0.1/", "http://172.16.5.4/", "http://172.31.255.255/", "http://192.168.1.1/admin",
		"http://169.254.169.254/latest/meta-data/", "http://100.64.0.1/", "http://[fd00::1]/", "http://[fe80::1]/",
		"http://[::ffff:10.1.2.3]/", "http://[::ffff:169.254.169.254]/",
		// RFC 6890's other special-purpose ranges, and IPv6 forms that
		// carry a private IPv4 address (issue 26).
		"http://192.0.0.192/opc/v2/instance/", "http://198.18.0.1/", "http://198.19.255.1/", "http://224.0.0.1/",
		"http://239.255.255.250:1900/", "http://255.255.255.255/", "http://240.0.0.1/",
		"http://[64:ff9b::a9fe:a9fe]/latest/meta-data/", "http://[64:ff9b::10.0.0.1]/", "http://[64:ff9b:1::a00:1]/",
		"http://[::a9fe:a9fe]/", "http://[2002:a9fe:a9fe::1]/", "http://[2002:7f00:1::]/", "http://[ff02::1]/",
		"http://[fec0::1]/", "http://[100::1]/",
		// Names that only resolve inside a network.
		"http://metadata.google.internal/computeMetadata/v1/", "http://metadata/", "http://intranet/",
		"http://instance-data.ec2.internal/", "http://db.internal/", "http://printer.local/", "http://nas.home.arpa/",
		"http://wiki.corp/", "http://INTRANET./",
	}
	for _, in := range private {
		if _, err := p.NormalizeURL(in); !errors.Is(err, ErrInvalidURL) {
			t.Errorf("NormalizeURL(%q) = %v; want ErrInvalidURL (private target)", in, err)
		}
		open := p
		open.AllowPrivate = true
		if _, err := open.NormalizeURL(in); err != nil {
			t.Errorf("with AllowPrivate, NormalizeURL(%q) = %v", in, err)
		}
	}
	for _, in := range []string{"https://www.sho.rt/x", "https://WWW.SHO.RT/", "https://takedown.example/"} {
		if _, err := p.NormalizeURL(in); !errors.Is(err, ErrInvalidURL) {
			t.Errorf("NormalizeURL(%q) = %v; want ErrInvalidURL", in, err)
		}
	}
	for _, in := range []string{"http://172.32.0.1/", "http://192.169.0.1/", "http://100.128.0.1/", "https://www.example.com/", "https://sho.rt.example/",
		"http://198.20.0.1/", "http://223.255.255.1/", "http://[64:ff9b::808:808]/", "http://[2002:808:808::1]/", "http://[2606:4700::1111]/",
		"https://internal.example/", "https://local.example.com/"} {
		if _, err := p.NormalizeURL(in); err != nil {
			t.Errorf("NormalizeURL(%q) = %v; want it accepted", in, err)
		}
	}
}
