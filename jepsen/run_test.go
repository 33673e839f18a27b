package jepsen

import "testing"

func TestDecodeSequential(t *testing.T) {
	for code, want := range map[string]uint64{"0": 0, "9": 9, "A": 10, "z": 61, "10": 62, "zz": 62*62 - 1} {
		if got, err := decodeSequential(code); err != nil || got != want {
			t.Errorf("decode(%q) = %d, %v; want %d", code, got, err, want)
		}
	}
	for _, bad := range []string{"", "01", "a-b", "zzzzzzzzzzzz"} {
		if _, err := decodeSequential(bad); err == nil {
			t.Errorf("decode(%q) succeeded", bad)
		}
	}
}
