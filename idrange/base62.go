package idrange

import (
	"errors"
	"math"
)

// Alphabet is the base62 alphabet, in value order.
const Alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// ErrInvalidBase62 is returned by Decode for empty input, a character outside
// the alphabet, or a value that overflows uint64.
var ErrInvalidBase62 = errors.New("invalid base62")

var decodeTable = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for i := 0; i < len(Alphabet); i++ {
		t[Alphabet[i]] = int8(i)
	}
	return t
}()

// Encode returns the shortest base62 form of n ("0" for zero).
func Encode(n uint64) string {
	return EncodePadded(n, 1)
}

// EncodePadded returns base62 of n left-padded with '0' to at least width
// characters.
func EncodePadded(n uint64, width int) string {
	var buf [11]byte // 62^11 > 2^64
	i := len(buf)
	for n > 0 || i == len(buf) {
		i--
		buf[i] = Alphabet[n%62]
		n /= 62
	}
	for len(buf)-i < width && i > 0 {
		i--
		buf[i] = '0'
	}
	s := string(buf[i:])
	for len(s) < width {
		s = "0" + s
	}
	return s
}

// Decode parses a base62 string. Leading zeros are accepted.
func Decode(s string) (uint64, error) {
	if s == "" {
		return 0, ErrInvalidBase62
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		d := decodeTable[s[i]]
		if d < 0 {
			return 0, ErrInvalidBase62
		}
		if n > (math.MaxUint64-uint64(d))/62 {
			return 0, ErrInvalidBase62
		}
		n = n*62 + uint64(d)
	}
	return n, nil
}
