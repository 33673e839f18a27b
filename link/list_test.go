package link

import (
	"strings"
	"testing"
)

// TestMatchesTextFoldsAsToLower: the text filter's copy-free match agrees
// with strings.Contains of strings.ToLower on both sides, for ASCII and
// for text whose lower case is another length (the Kelvin sign, İ), on
// strings and on record bytes alike.
func TestMatchesTextFoldsAsToLower(t *testing.T) {
	texts := []string{"", "a", "REPORT", "report", "e.example/1", "Ünïcode", "\u212a", "k", "İ", "i̇", "/Q?", "zz"}
	fields := []string{"", "Quarterly Report", "https://E.example/1?x=Y", "ÜNÏCODE title", "\u212aelvin", "kelvin",
		"İstanbul", "abc", "a/q?b", "zzz", "\xff\xfe broken UTF-8 REPORT"}
	for _, text := range texts {
		q := &ListQuery{Text: text}
		lower := strings.ToLower(text)
		for _, code := range []string{"abc", "ZZtop"} {
			for _, url := range fields {
				for _, title := range fields {
					want := strings.Contains(strings.ToLower(code), lower) || strings.Contains(strings.ToLower(url), lower) ||
						strings.Contains(strings.ToLower(title), lower)
					if got := MatchesText(q, code, url, title); got != want {
						t.Fatalf("text %q in (%q, %q, %q): %v, want %v", text, code, url, title, got, want)
					}
					if got := MatchesText(q, []byte(code), []byte(url), []byte(title)); got != want {
						t.Fatalf("text %q in the bytes of (%q, %q, %q): %v, want %v", text, code, url, title, got, want)
					}
				}
			}
		}
	}
}
