package link

import (
	"errors"
	"strconv"
	"strings"
)

// Rule sends the visitors it matches to its own URL (issue 16, item 6).
// Each set condition must hold; an empty one matches everyone.
type Rule struct {
	// Device is ios, android or desktop (from the User-Agent, as
	// analytics reads it).
	Device string
	// Country is an ISO 3166-1 alpha-2 code, upper case (from the client
	// address, as analytics reads it).
	Country string
	// Language is a language tag, lower case: "fr" matches fr, fr-CA and
	// fr-FR; "fr-ca" matches fr-CA only. It is compared with the client's
	// most preferred language (Accept-Language).
	Language string
	// URL is where the rule sends its visitors (checked as Link.URL).
	URL string
}

// MaxRules bounds a link's rules.
const MaxRules = 20

// Devices a rule may name.
const (
	DeviceIOS     = "ios"
	DeviceAndroid = "android"
	DeviceDesktop = "desktop"
)

// Visitor is what a redirect knows of its client, for rules: each field
// empty when unknown.
type Visitor struct {
	Device, Country, Language string
}

// Matches reports whether v meets every condition of r.
func (r *Rule) Matches(v Visitor) bool {
	if r.Device != "" && r.Device != v.Device {
		return false
	}
	if r.Country != "" && r.Country != v.Country {
		return false
	}
	if r.Language != "" && v.Language != r.Language &&
		!(strings.HasPrefix(v.Language, r.Language) && v.Language[len(r.Language)] == '-') {
		return false
	}
	return true
}

// Destination is where l sends v: the URL of the first rule v matches,
// else l.URL.
func (l *Link) Destination(v Visitor) string {
	for i := range l.Rules {
		if l.Rules[i].Matches(v) {
			return l.Rules[i].URL
		}
	}
	return l.URL
}

// ValidateRules checks rules under p and normalises them (each URL as
// CreateRequest.Validate does the link's, the country upper case, the
// language lower case). Its errors are *FieldError naming rules[i].
func ValidateRules(rules []Rule, p URLPolicy) error {
	if len(rules) > MaxRules {
		return &FieldError{Err: ErrInvalidInput, Field: "rules", Reason: "at most " + strconv.Itoa(MaxRules) + " rules"}
	}
	for i := range rules {
		r := &rules[i]
		name := "rules[" + strconv.Itoa(i) + "]"
		bad := func(f, reason string) error {
			return &FieldError{Err: ErrInvalidInput, Field: name + "." + f, Reason: reason}
		}
		switch r.Device {
		case "", DeviceIOS, DeviceAndroid, DeviceDesktop:
		default:
			return bad("device", "must be ios, android or desktop")
		}
		r.Country = strings.ToUpper(r.Country)
		if r.Country != "" && !isLetters(r.Country, 2, 2) {
			return bad("country", "must be an ISO 3166-1 alpha-2 code such as DE")
		}
		r.Language = strings.ToLower(r.Language)
		if r.Language != "" && !validLanguage(r.Language) {
			return bad("language", "must be a language tag such as fr or pt-BR")
		}
		if r.Device == "" && r.Country == "" && r.Language == "" {
			return bad("device", "a rule needs a device, a country or a language")
		}
		if r.URL == "" {
			return &FieldError{Err: ErrInvalidURL, Field: name + ".url", Reason: "is required"}
		}
		u, err := p.NormalizeURL(r.URL)
		if err != nil {
			var fe *FieldError
			if errors.As(err, &fe) {
				return &FieldError{Err: fe.Err, Field: name + ".url", Reason: fe.Reason}
			}
			return err
		}
		r.URL = u
	}
	return nil
}

// validLanguage accepts a primary subtag of 2–3 letters and at most one
// more subtag of 2–8 letters or digits (fr, pt-br, zh-hant).
func validLanguage(s string) bool {
	primary, rest, more := strings.Cut(s, "-")
	if !isLetters(primary, 2, 3) {
		return false
	}
	if !more {
		return true
	}
	if len(rest) < 2 || len(rest) > 8 {
		return false
	}
	for _, c := range []byte(rest) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func isLetters(s string, lo, hi int) bool {
	if len(s) < lo || len(s) > hi {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// PreferredLanguage is the most preferred language of an Accept-Language
// header, lower case, "" for none (or only *): the range with the highest
// q, the first of equals. At most the first 16 ranges are read.
func PreferredLanguage(header string) string {
	best, bestQ := "", 0.0
	for i, part := range strings.Split(header, ",") {
		if i == 16 {
			break
		}
		tag, params, _ := strings.Cut(part, ";")
		tag = strings.ToLower(strings.TrimSpace(tag))
		if tag == "" || tag == "*" || len(tag) > 35 {
			continue
		}
		q := 1.0
		if k, v, ok := strings.Cut(strings.TrimSpace(params), "="); ok && strings.TrimSpace(k) == "q" {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || f < 0 || f > 1 {
				continue
			}
			q = f
		}
		if q > bestQ {
			best, bestQ = tag, q
		}
	}
	return best
}
