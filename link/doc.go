// Package link holds the domain of linkraft: the Link record, the sentinel
// errors every layer shares, and the validation rules for destination URLs
// and custom aliases. It imports nothing of the project, so every other
// package may import it.
package link
