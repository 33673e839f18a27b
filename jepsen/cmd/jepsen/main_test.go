package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Bad arguments exit 254 with a message, before anything is set up.
func TestBadArgumentsExit254(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"bogus"},
		{"test", "-nodes", "20"},
		{"test", "-workload", "register,nope"},
		{"test", "-nemesis", "partition,earthquake"},
		{"test", "-per-key", "11"},
		{"test", "-node-args", "-fast-raft -remote-cache-ttl 1m"},
		{"test", "-node-args", "-click-flush=5s"},
		{"test", "stray"},
		{"test", "-time-limit", "soon"},
		{"table"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != exitBadArgs {
			t.Errorf("%q: exit %d, want %d (stderr %q)", args, code, exitBadArgs, errb.String())
		}
		if errb.Len() == 0 {
			t.Errorf("%q: no message on stderr", args)
		}
	}
}

func TestHelpExitsZero(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"help"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "jepsen test") {
		t.Fatalf("help: exit %d, %q", code, out.String())
	}
}
