// Package golden pins encodings in a file: one line per sample, its name
// and its bytes in hex. The Raft log, the bbolt files and the peer
// protocol outlive any version of the code, so their tests compare what
// the encoders write now with what the file pinned. It is imported only by
// _test files.
package golden

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
)

// Sample is one pinned encoding.
type Sample struct {
	Name  string
	Bytes []byte
}

// Check compares samples with the file at path, which must pin exactly
// them; with update set, it writes the file from samples first. It returns
// the pinned bytes by name, for the caller's round trips.
func Check(tb testing.TB, path string, samples []Sample, update bool) map[string][]byte {
	tb.Helper()
	if update {
		var sb strings.Builder
		for _, s := range samples {
			fmt.Fprintf(&sb, "%s %s\n", s.Name, hex.EncodeToString(s.Bytes))
		}
		if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	pinned := map[string][]byte{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		i := strings.LastIndexByte(sc.Text(), ' ')
		if i < 0 {
			tb.Fatalf("%s: line %q has no encoding", path, sc.Text())
		}
		b, err := hex.DecodeString(sc.Text()[i+1:])
		if err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
		pinned[sc.Text()[:i]] = b
	}
	if len(pinned) != len(samples) {
		tb.Fatalf("%s pins %d encodings, there are %d samples (go test -update-golden rewrites it: review the diff)", path, len(pinned), len(samples))
	}
	for _, s := range samples {
		want, ok := pinned[s.Name]
		if !ok {
			tb.Errorf("%s is not pinned", s.Name)
			continue
		}
		if got := hex.EncodeToString(s.Bytes); got != hex.EncodeToString(want) {
			tb.Errorf("%s encodes as\n%s\npinned\n%x", s.Name, got, want)
		}
	}
	return pinned
}
