package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/schollz/progressbar/v3"

	"github.com/linkraft/linkraft/internal/backup"
)

// linknode backup -o FILE and linknode restore FILE: the admin API's
// GET /admin/v1/backup and POST /admin/v1/restore, with a progress bar (on
// stderr), the file checked on the way (a backup as it arrives, a restore
// before it is sent) and a summary.

func runBackup(name string, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("linknode "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	ep := endpointFlags(fs, lookupEnv, false, "admin API key")
	out := fs.String("o", "", "backup: the file to write")
	resume := fs.Bool("resume", false, "restore: go on with a restore that was cut short (the cluster holds what it put)")
	quiet := fs.Bool("q", false, "no progress bar")
	if code, done := parseArgs(fs, args); done {
		return code
	}
	ctx, stop, t, progress, ok := ep.start(lookupEnv, *quiet, stderr)
	if !ok {
		return 2
	}
	defer stop()
	if name == "backup" {
		if *out == "" || fs.NArg() != 0 {
			fmt.Fprintln(stderr, "usage: linknode backup [-addr A] [-key K] -o FILE")
			return 2
		}
		return t.backup(ctx, *out, stdout, stderr, progress)
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: linknode restore [-addr A] [-key K] [-resume] FILE")
		return 2
	}
	return t.restore(ctx, fs.Arg(0), *resume, stdout, stderr, progress)
}

// backup writes the cluster's backup to out: beside it first, checked as
// it arrives, and renamed into place only when whole.
func (t transfer) backup(ctx context.Context, out string, stdout, stderr, progress io.Writer) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.base+"/admin/v1/backup", nil)
	if err != nil {
		fmt.Fprintln(stderr, "linknode:", err)
		return 1
	}
	resp, err := t.do(req, "backup")
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer resp.Body.Close()
	file, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*")
	if err != nil {
		fmt.Fprintln(stderr, "linknode:", err)
		return 1
	}
	defer os.Remove(file.Name())
	defer file.Close()
	bar := newBar(-1, "backing up", progress)
	_, man, err := backup.Read(io.TeeReader(resp.Body, io.MultiWriter(file, bar)), backup.Visitor{})
	_ = bar.Finish()
	if err != nil {
		fmt.Fprintln(stderr, "linknode: the backup was cut short or damaged on the way; nothing was written to", out+":", err)
		return 1
	}
	if err := putInPlace(file, out); err != nil {
		fmt.Fprintln(stderr, "linknode:", err)
		return 1
	}
	var records uint64
	for _, s := range man.Shards {
		records += s.Records
	}
	fmt.Fprintf(stdout, "backup of %d shards, %d links (tombstones included), %d keys and %d blocked domains written to %s\n",
		len(man.Shards), records, man.Keys, man.Blocked, out)
	return 0
}

// restore checks path and sends it to the cluster.
func (t transfer) restore(ctx context.Context, path string, resume bool, stdout, stderr, progress io.Writer) int {
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(stderr, "linknode:", err)
		return 1
	}
	defer f.Close()
	if _, _, err := backup.Read(f, backup.Visitor{}); err != nil {
		fmt.Fprintf(stderr, "linknode: %s is not a whole backup; nothing was sent: %v\n", path, err)
		return 1
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		fmt.Fprintln(stderr, "linknode:", err)
		return 1
	}
	bar := newBar(size, "restoring", progress)
	body := progressbar.NewReader(f, bar)
	u := t.base + "/admin/v1/restore"
	if resume {
		u += "?resume=true"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, &body)
	if err != nil {
		fmt.Fprintln(stderr, "linknode:", err)
		return 1
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := t.do(req, "restore")
	_ = bar.Finish()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer resp.Body.Close()
	b, err := readBounded(resp.Body, maxAnswer)
	if err != nil {
		fmt.Fprintln(stderr, "linknode:", err)
		return 1
	}
	var rep struct {
		Links     int      `json:"links"`
		Present   int      `json:"present"`
		Conflicts int      `json:"conflicts"`
		Codes     []string `json:"conflicting_codes"`
		Keys      int      `json:"keys"`
		Blocked   int      `json:"blocked_domains"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		fmt.Fprintln(stderr, "linknode: cannot read the restore's answer:", err)
		return 1
	}
	fmt.Fprintf(stdout, "restored %d links (%d were there already), %d keys and %d blocked domains\n", rep.Links, rep.Present, rep.Keys, rep.Blocked)
	if rep.Conflicts > 0 {
		fmt.Fprintf(stderr, "linknode: %d codes were held by other links and left as they are: %s\n", rep.Conflicts, cell(strings.Join(rep.Codes, " ")))
		return 1
	}
	return 0
}
