package idrange

import (
	"errors"
	"fmt"
)

// Mode selects how IDs become codes.
type Mode string

// Code modes.
const (
	// ModePermuted gives 7-character codes that are not sequential.
	ModePermuted Mode = "permuted"
	// ModeSequential gives the shortest codes: base62 of the ID itself.
	ModeSequential Mode = "sequential"
)

// ErrExhausted is returned when an ID is past the end of the mode's space.
var ErrExhausted = errors.New("code space exhausted")

// Coder maps IDs to codes for one mode and key.
type Coder struct {
	mode Mode
	perm *Permutation
}

// NewCoder returns a Coder. The key is used in permuted mode only.
func NewCoder(mode Mode, key []byte) (*Coder, error) {
	switch mode {
	case ModeSequential:
		return &Coder{mode: mode}, nil
	case ModePermuted, "":
		p, err := NewPermutation(key)
		if err != nil {
			return nil, err
		}
		return &Coder{mode: ModePermuted, perm: p}, nil
	}
	return nil, fmt.Errorf("unknown code mode %q (want %q or %q)", mode, ModePermuted, ModeSequential)
}

// Mode returns the coder's mode.
func (c *Coder) Mode() Mode { return c.mode }

// Code returns the code of id.
func (c *Coder) Code(id uint64) (string, error) {
	if c.mode == ModeSequential {
		return Encode(id), nil
	}
	v, err := c.perm.Permute(id)
	if err != nil {
		return "", ErrExhausted
	}
	return EncodePadded(v, CodeLength), nil
}

// ID returns the id a generated code came from; it fails for codes that this
// coder cannot have produced.
func (c *Coder) ID(code string) (uint64, error) {
	if c.mode == ModeSequential {
		if len(code) > 1 && code[0] == '0' {
			return 0, ErrInvalidBase62
		}
		return Decode(code)
	}
	if len(code) != CodeLength {
		return 0, ErrInvalidBase62
	}
	v, err := Decode(code)
	if err != nil {
		return 0, err
	}
	return c.perm.Invert(v)
}
