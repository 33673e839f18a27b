package link

import (
	"errors"
	"strings"
	"testing"
)

func TestRulesMatchFirstWins(t *testing.T) {
	t.Parallel()
	l := Link{URL: "https://example.com/default", Rules: []Rule{
		{Device: DeviceIOS, Country: "DE", URL: "https://example.com/ios-de"},
		{Device: DeviceIOS, URL: "https://example.com/ios"},
		{Language: "fr-ca", URL: "https://example.com/fr-ca"},
		{Language: "fr", URL: "https://example.com/fr"},
		{Country: "DE", URL: "https://example.com/de"},
	}}
	for v, want := range map[Visitor]string{
		{}:                                   "https://example.com/default",
		{Device: "ios", Country: "DE"}:       "https://example.com/ios-de",
		{Device: "ios", Country: "FR"}:       "https://example.com/ios",
		{Device: "android", Country: "DE"}:   "https://example.com/de",
		{Language: "fr-ca"}:                  "https://example.com/fr-ca",
		{Language: "fr-fr"}:                  "https://example.com/fr",
		{Language: "fr"}:                     "https://example.com/fr",
		{Language: "fry"}:                    "https://example.com/default", // a prefix is not a subtag
		{Device: "desktop", Language: "de"}:  "https://example.com/default",
		{Device: "desktop", Country: "DE"}:   "https://example.com/de",
		{Device: "ios", Language: "fr-ca"}:   "https://example.com/ios", // order, not specificity
		{Country: "de"}:                      "https://example.com/default",
		{Device: "android", Language: "fr"}:  "https://example.com/fr",
		{Device: "desktop", Country: "US"}:   "https://example.com/default",
		{Device: "android", Country: "AT"}:   "https://example.com/default",
		{Device: "ios", Language: "en-gb"}:   "https://example.com/ios",
		{Device: "android", Language: "frx"}: "https://example.com/default",
	} {
		if got := l.Destination(v); got != want {
			t.Errorf("Destination(%+v) = %s, want %s", v, got, want)
		}
	}
}

func TestValidateRules(t *testing.T) {
	t.Parallel()
	ok := []Rule{{Device: "ios", URL: "https://apps.example/ios"}, {Country: "de", Language: "PT-BR", URL: "HTTPS://Example.com/x"}}
	if err := ValidateRules(ok, URLPolicy{}); err != nil {
		t.Fatal(err)
	}
	if ok[1].Country != "DE" || ok[1].Language != "pt-br" || ok[1].URL != "https://example.com/x" {
		t.Fatalf("not normalised: %+v", ok[1])
	}
	many := make([]Rule, MaxRules+1)
	for i := range many {
		many[i] = Rule{Country: "DE", URL: "https://e.example/"}
	}
	for name, c := range map[string]struct {
		rules []Rule
		field string
		is    error
	}{
		"too many":       {many, "rules", ErrInvalidInput},
		"no condition":   {[]Rule{{URL: "https://e.example/"}}, "rules[0].device", ErrInvalidInput},
		"bad device":     {[]Rule{{Device: "iphone", URL: "https://e.example/"}}, "rules[0].device", ErrInvalidInput},
		"bad country":    {[]Rule{{Country: "DEU", URL: "https://e.example/"}}, "rules[0].country", ErrInvalidInput},
		"digit country":  {[]Rule{{Country: "D1", URL: "https://e.example/"}}, "rules[0].country", ErrInvalidInput},
		"bad language":   {[]Rule{{Language: "french!", URL: "https://e.example/"}}, "rules[0].language", ErrInvalidInput},
		"long subtag":    {[]Rule{{Language: "fr-abcdefghi", URL: "https://e.example/"}}, "rules[0].language", ErrInvalidInput},
		"no url":         {[]Rule{{Device: "ios"}}, "rules[0].url", ErrInvalidURL},
		"javascript url": {[]Rule{{Device: "ios", URL: "https://e.example/"}, {Device: "android", URL: "javascript:alert(1)"}}, "rules[1].url", ErrInvalidURL},
		"crlf url":       {[]Rule{{Device: "ios", URL: "https://e.example/\r\nX: y"}}, "rules[0].url", ErrInvalidURL},
	} {
		err := ValidateRules(c.rules, URLPolicy{})
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, c.is) {
			t.Errorf("%s: %v, want a %v on %s", name, err, c.is, c.field)
		}
	}
}

func TestPreferredLanguage(t *testing.T) {
	t.Parallel()
	for h, want := range map[string]string{
		"":                                   "",
		"*":                                  "",
		"fr-CH, fr;q=0.9, en;q=0.8, *;q=0.5": "fr-ch",
		"en;q=0.5, de;q=0.9":                 "de",
		"de;q=0.5, en;q=0.5":                 "de",
		"en;q=bad, de;q=0.1":                 "de",
		"en;q=0":                             "",
		strings.Repeat("x,", 16) + "de":      "x",
		strings.Repeat("a", 40) + ", it":     "it",
	} {
		if got := PreferredLanguage(h); got != want {
			t.Errorf("PreferredLanguage(%q) = %q, want %q", h, got, want)
		}
	}
}
