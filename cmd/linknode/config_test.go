package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestFlagsEnvAndDefaults(t *testing.T) {
	c, err := ParseFlags(nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != ":8080" || c.RaftAddr != ":7000" || c.GossipAddr != ":7946" || c.DataDir != "linknode-data" ||
		c.Shards != 8 || c.Replicas != 3 || c.BootstrapExpect != 1 || c.CodeMode != "permuted" || c.ShutdownTimeout != 10*time.Second {
		t.Fatalf("defaults = %+v", c)
	}
	// Environment over defaults, flags over environment.
	c, err = ParseFlags([]string{"-http-addr", "127.0.0.1:9000"}, env(map[string]string{
		"LINKNODE_HTTP_ADDR": ":1111", "LINKNODE_SHARDS": "16", "LINKNODE_CODE_MODE": "sequential", "LINKNODE_PUBLIC_URL": "https://sho.rt",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != "127.0.0.1:9000" || c.Shards != 16 || c.CodeMode != "sequential" || c.PublicURL != "https://sho.rt" {
		t.Fatalf("env/flag precedence = %+v", c)
	}
}

func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{args: []string{"-shards", "x"}, want: "invalid value"},
		{env: map[string]string{"LINKNODE_SHARDS": "many"}, want: "LINKNODE_SHARDS"},
		{args: []string{"-bootstrap-expect", "0"}, want: "-bootstrap-expect"},
		{args: []string{"-http-addr", "8080"}, want: "-http-addr"},
		{args: []string{"-log-format", "xml"}, want: "-log-format"},
		{args: []string{"-log-level", "loud"}, want: "-log-level"},
		{args: []string{"-raft-trailing-logs", "0"}, want: "-raft-trailing-logs"},
		{args: []string{"-raft-snapshot-interval", "1ns"}, want: "-raft-snapshot-interval"},
		{args: []string{"extra"}, want: "unexpected argument"},
	} {
		_, err := ParseFlags(tc.args, env(tc.env), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseFlags(%v, %v) = %v, want an error mentioning %q", tc.args, tc.env, err, tc.want)
		}
	}
}

func TestVersionSubcommand(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"version"}, &out, io.Discard); code != 0 || !strings.HasPrefix(out.String(), "linknode ") {
		t.Fatalf("version: %d %q", code, out.String())
	}
	if code := run([]string{"-shards", "nope"}, io.Discard, io.Discard); code != 2 {
		t.Fatalf("bad flag exit code %d, want 2", code)
	}
}
