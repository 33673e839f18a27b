package idrange

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
)

// CodeLength is the length of codes in permuted mode.
const CodeLength = 7

// PermDomain is the size of the permuted ID space: 62^7.
const PermDomain uint64 = 62 * 62 * 62 * 62 * 62 * 62 * 62

const (
	halfBits = 21 // 2^42 >= 62^7 > 2^41
	halfMask = 1<<halfBits - 1
	rounds   = 6
)

// KeySize is the size of a permutation key in bytes.
const KeySize = 16

// ErrOutOfDomain is returned when an ID is outside [0, PermDomain).
var ErrOutOfDomain = errors.New("id outside the permutation domain")

// Permutation is a keyed bijection of [0, 62^7): a balanced Feistel network
// over 42 bits whose round function is AES-128 of (round, half), with cycle
// walking to stay inside the domain. Distinct inputs give distinct outputs by
// construction, and without the key the sequence is not predictable.
type Permutation struct {
	block cipher.Block
}

// NewPermutation returns the permutation for a 16-byte key.
func NewPermutation(key []byte) (*Permutation, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("permutation key must be %d bytes, got %d", KeySize, len(key))
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return &Permutation{block: b}, nil
}

func (p *Permutation) round(i int, half uint64) uint64 {
	var in, out [16]byte
	in[0] = byte(i)
	binary.BigEndian.PutUint64(in[8:], half)
	p.block.Encrypt(out[:], in[:])
	return binary.BigEndian.Uint64(out[:8]) & halfMask
}

func (p *Permutation) encrypt42(x uint64) uint64 {
	l, r := x>>halfBits, x&halfMask
	for i := 0; i < rounds; i++ {
		l, r = r, l^p.round(i, r)
	}
	return l<<halfBits | r
}

func (p *Permutation) decrypt42(x uint64) uint64 {
	l, r := x>>halfBits, x&halfMask
	for i := rounds - 1; i >= 0; i-- {
		l, r = r^p.round(i, l), l
	}
	return l<<halfBits | r
}

// Permute maps id in [0, 62^7) to its image in [0, 62^7).
func (p *Permutation) Permute(id uint64) (uint64, error) {
	if id >= PermDomain {
		return 0, ErrOutOfDomain
	}
	x := id
	for {
		x = p.encrypt42(x)
		if x < PermDomain {
			return x, nil
		}
	}
}

// Invert is the inverse of Permute.
func (p *Permutation) Invert(v uint64) (uint64, error) {
	if v >= PermDomain {
		return 0, ErrOutOfDomain
	}
	x := v
	for {
		x = p.decrypt42(x)
		if x < PermDomain {
			return x, nil
		}
	}
}
