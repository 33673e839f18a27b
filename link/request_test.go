package link

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestCreateRequestValidate: every rule of a create's input, each with the
// field it names, and the normalisation of what passes.
func TestCreateRequestValidate(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var p URLPolicy
	for _, tc := range []struct {
		name  string
		req   CreateRequest
		field string
		is    error
	}{
		{"no url", CreateRequest{}, "url", ErrInvalidURL},
		{"javascript url", CreateRequest{URL: "javascript:alert(1)"}, "url", ErrInvalidURL},
		{"crlf in url", CreateRequest{URL: "https://x.example/a\r\nSet-Cookie: x"}, "url", ErrInvalidURL},
		{"reserved alias", CreateRequest{URL: "https://x.example", Alias: "api"}, "alias", ErrInvalidAlias},
		{"short alias", CreateRequest{URL: "https://x.example", Alias: "ab"}, "alias", ErrInvalidAlias},
		{"past expiry", CreateRequest{URL: "https://x.example", ExpiresAt: now.Add(-time.Second)}, "expires_at", ErrInvalidInput},
		{"expiry too far", CreateRequest{URL: "https://x.example", ExpiresAt: now.Add(MaxTTL + time.Hour)}, "expires_at", ErrInvalidInput},
		{"redirect 303", CreateRequest{URL: "https://x.example", Redirect: 303}, "redirect", ErrInvalidInput},
		{"too many visits", CreateRequest{URL: "https://x.example", MaxVisits: MaxVisitsLimit + 1}, "max_visits", ErrInvalidInput},
		{"long tag", CreateRequest{URL: "https://x.example", Tags: []string{strings.Repeat("t", 65)}}, "tags", ErrInvalidInput},
	} {
		err := tc.req.Validate(p, now)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, tc.is) {
			t.Errorf("%s: %v, want a %q field error", tc.name, err, tc.field)
		}
	}
	req := CreateRequest{URL: "HTTPS://X.Example/a", Alias: "my-link", ExpiresAt: now.Add(time.Hour).In(time.FixedZone("x", 3600))}
	if err := req.Validate(p, now); err != nil {
		t.Fatal(err)
	}
	if req.URL != "https://x.example/a" || req.Redirect != DefaultRedirect || req.ExpiresAt.Location() != time.UTC {
		t.Fatalf("not normalised: %+v", req)
	}
}

func TestPatchValidate(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	bad, past, js := 303, now.Add(-time.Hour), "javascript:x"
	for _, p := range []Patch{{Redirect: &bad}, {ExpiresAt: &past}, {URL: &js}, {Tags: &[]string{strings.Repeat("t", 65)}}} {
		if err := p.Validate(URLPolicy{}, now); !errors.Is(err, ErrInvalidInput) && !errors.Is(err, ErrInvalidURL) {
			t.Errorf("%+v: %v", p, err)
		}
	}
	var zero time.Time
	u := "HTTPS://X.Example"
	p := Patch{URL: &u, ExpiresAt: &zero}
	if err := p.Validate(URLPolicy{}, now); err != nil || *p.URL != "https://x.example/" && *p.URL != "https://x.example" {
		t.Fatalf("%v, %v", err, *p.URL)
	}
	if p.Empty() || !(&Patch{}).Empty() {
		t.Fatal("Empty")
	}
}
