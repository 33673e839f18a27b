package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// sdNotify sends state ("READY=1", "STOPPING=1") to the service manager's
// notification socket ($NOTIFY_SOCKET: systemd's Type=notify), if there is
// one. It is one datagram.
func sdNotify(lookupEnv func(string) (string, bool), state string) error {
	path, ok := lookupEnv("NOTIFY_SOCKET")
	if !ok || path == "" {
		return nil
	}
	if path[0] == '@' {
		path = "\x00" + path[1:] // an abstract socket
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	return nil
}

// runProbe is linknode probe: 0 if the URL (a node's /readyz by default)
// answers 200 within the timeout, else 1. It is the container image's
// HEALTHCHECK, which has no shell or curl to run.
func runProbe(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("linknode probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "http://127.0.0.1:8080/readyz", "the URL that must answer 200")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	if code, done := parseArgs(fs, args); done {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		fmt.Fprintln(stderr, "linknode probe:", err)
		return 2
	}
	resp, err := cliClient().Do(req)
	if err != nil {
		fmt.Fprintln(stderr, "linknode probe:", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := readBounded(resp.Body, 4096)
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "linknode probe: %s answered %d %s\n", *url, resp.StatusCode, termSafe(body))
		return 1
	}
	return 0
}

// quietParse is fs.Parse without the flag package's own error message and
// usage dump: the caller says what went wrong, and shows the usage for -h.
func quietParse(fs *flag.FlagSet, args []string) error {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	return err
}

// suggestFlag returns ", did you mean -X?" for an unknown flag with a
// defined one close to it (a prefix, or at most two edits away), else "".
func suggestFlag(fs *flag.FlagSet, err error) string {
	const unknown = "flag provided but not defined: -"
	msg := err.Error()
	if !strings.HasPrefix(msg, unknown) {
		return ""
	}
	name := strings.TrimLeft(strings.TrimPrefix(msg, unknown), "-")
	best, bestD := "", 3
	fs.VisitAll(func(f *flag.Flag) {
		d := editDistance(name, f.Name)
		if len(name) >= 3 && strings.HasPrefix(f.Name, name) {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = f.Name, d
		}
	})
	if best == "" {
		return ""
	}
	return ", did you mean -" + best + "?"
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// fileExists reports whether path names something.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// parseArgs parses a subcommand's args, flags before or after its words
// (linknode keys create -name N as well as linknode keys -name N create;
// after "--" everything is a word): fs.Args() are the words. done says the
// command ends here: with 0 after -h (its flags printed), 2 after a bad
// flag (said why).
func parseArgs(fs *flag.FlagSet, args []string) (code int, done bool) {
	var words []string
	for {
		err := quietParse(fs, args)
		switch {
		case errors.Is(err, flag.ErrHelp):
			fs.Usage()
			return 0, true
		case err != nil:
			fmt.Fprintf(fs.Output(), "%s: %v%s (%s -h lists its flags)\n", fs.Name(), err, suggestFlag(fs, err), fs.Name())
			return 2, true
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			words = append(words, rest...)
			break
		}
		words, args = append(words, rest[0]), rest[1:]
	}
	_ = fs.Parse(append([]string{"--"}, words...))
	return 0, false
}
