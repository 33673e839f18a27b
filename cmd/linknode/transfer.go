package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// linknode import FILE and linknode export: the public API's
// /api/v1/links/import and /api/v1/links/export with a progress bar (on
// stderr) and a summary.

// transfer is the connection of import and export to a node's public
// listener.
type transfer struct {
	base, key string
	client    *http.Client
}

// maxShownFailures bounds the failed rows import prints.
const maxShownFailures = 20

func runTransfer(name string, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("linknode "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	ep := endpointFlags(fs, lookupEnv, true, "API key with links:read (export) or links:write (import)")
	format := fs.String("format", "ndjson", "export: ndjson or csv")
	out := fs.String("o", "-", "export: the file to write (- for stdout)")
	quiet := fs.Bool("q", false, "no progress bar")
	if code, done := parseArgs(fs, args); done {
		return code
	}
	ctx, stop, t, progress, ok := ep.start(lookupEnv, *quiet, stderr)
	if !ok {
		return 2
	}
	defer stop()
	if name == "import" {
		if fs.NArg() != 1 {
			fmt.Fprintln(stderr, "usage: linknode import [-url U] [-key K] FILE (- for stdin)")
			return 2
		}
		return t.importFile(ctx, fs.Arg(0), stdout, stderr, progress)
	}
	if fs.NArg() != 0 || (*format != "ndjson" && *format != "csv") {
		fmt.Fprintln(stderr, "usage: linknode export [-url U] [-key K] [-format ndjson|csv] [-o FILE]")
		return 2
	}
	return t.export(ctx, *format, *out, stdout, stderr, progress)
}

// start connects a transfer (see endpoint.connect) and returns the
// context that SIGINT and SIGTERM end and where its progress bar goes:
// stderr when it is a terminal and quiet is not set, else nowhere (a bar
// redrawn with carriage returns is noise in a file or a pipe).
func (e endpoint) start(lookupEnv func(string) (string, bool), quiet bool, stderr io.Writer) (context.Context, context.CancelFunc, transfer, io.Writer, bool) {
	base, key, ok := e.connect(lookupEnv, stderr)
	if !ok {
		return nil, nil, transfer{}, nil, false
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	progress := io.Discard
	if f, isFile := stderr.(*os.File); isFile && !quiet && term.IsTerminal(int(f.Fd())) {
		progress = stderr
	}
	return ctx, stop, transfer{base: base, key: key, client: cliClient()}, progress, true
}

// do sends req with the key and returns its answer if it is 200; an error
// names what was refused and why.
func (t transfer) do(req *http.Request, what string) (*http.Response, error) {
	req.Header.Set("Authorization", "Bearer "+t.key)
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("linknode: %w", err)
	}
	if loc, err := resp.Location(); err == nil && resp.StatusCode/100 == 3 {
		// A 307 or 308 of a body that cannot be sent again comes back
		// unfollowed (cliClient refuses the others).
		resp.Body.Close()
		return nil, fmt.Errorf("linknode: %s: %w", what, redirectError(loc))
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, fmt.Errorf("linknode: %s refused: %d %s", what, resp.StatusCode, termSafe(bytes.TrimSpace(b)))
	}
	return resp, nil
}

func newBar(total int64, desc string, w io.Writer) *progressbar.ProgressBar {
	return progressbar.NewOptions64(total, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(desc),
		progressbar.OptionShowBytes(true), progressbar.OptionShowCount(), progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(), progressbar.OptionSetWidth(30))
}

// importFile uploads path and reads the per-row answers as they stream.
func (t transfer) importFile(ctx context.Context, path string, stdout, stderr, progress io.Writer) int {
	var in io.Reader = os.Stdin
	size := int64(-1)
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(stderr, "linknode:", err)
			return 1
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			size = st.Size()
		}
		in = f
	}
	bar := newBar(size, "uploading", progress)
	reader := progressbar.NewReader(in, bar)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.base+"/api/v1/links/import", &reader)
	if err != nil {
		fmt.Fprintln(stderr, "linknode:", err)
		return 1
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := t.do(req, "import")
	if err != nil {
		_ = bar.Exit()
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer resp.Body.Close()
	type result struct {
		Row     int    `json:"row"`
		Status  int    `json:"status"`
		Done    bool   `json:"done"`
		Format  string `json:"format"`
		Rows    int    `json:"rows"`
		Created int    `json:"created"`
		Failed  int    `json:"failed"`
		Problem *struct {
			Type, Detail string
		} `json:"problem"`
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var failures []string
	failed := 0
	var sum *result
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			continue
		}
		if r.Done {
			sum = &r
			break
		}
		bar.Describe(fmt.Sprintf("row %d", r.Row))
		if r.Status != http.StatusCreated {
			failed++
			if len(failures) < maxShownFailures && r.Problem != nil {
				failures = append(failures, fmt.Sprintf("  row %d: %d %s", r.Row, r.Status, cell(r.Problem.Detail)))
			}
		}
	}
	_ = bar.Finish()
	for _, f := range failures {
		fmt.Fprintln(stderr, f)
	}
	if failed > len(failures) {
		fmt.Fprintf(stderr, "  … and %d more failed rows\n", failed-len(failures))
	}
	if sum == nil {
		why := "the connection was cut"
		if err := sc.Err(); err != nil {
			why = err.Error()
		}
		fmt.Fprintf(stderr, "linknode: the import ended without its summary (%s): rows answered above are stored\n", why)
		return 1
	}
	fmt.Fprintf(stdout, "imported %s (%s): %d rows, %d created, %d failed\n", path, cell(sum.Format), sum.Rows, sum.Created, sum.Failed)
	if sum.Problem != nil {
		fmt.Fprintf(stderr, "linknode: the import stopped: %s\n", cell(sum.Problem.Detail))
		return 1
	}
	if sum.Failed > 0 {
		return 1
	}
	return 0
}

// countCSVRecords counts the records of a CSV stream (RFC 4180: a line
// break inside quotes is a field's) in constant memory, whatever a field's
// length: a reader of whole records would hold a field as long as the
// server cares to send. It returns io.EOF at a clean end, and
// io.ErrUnexpectedEOF for a stream that ends inside quotes.
func countCSVRecords(r io.Reader) (int, error) {
	buf := make([]byte, 32<<10)
	n, quoted, midRecord := 0, false, false
	for {
		m, err := r.Read(buf)
		for _, c := range buf[:m] {
			switch {
			case c == '"':
				quoted = !quoted // "" inside quotes toggles twice
				midRecord = true
			case c == '\n' && !quoted:
				if midRecord { // a blank line is no record, as for csv.Reader
					n++
				}
				midRecord = false
			case c != '\r':
				midRecord = true
			}
		}
		if err == io.EOF {
			if quoted {
				return n, io.ErrUnexpectedEOF
			}
			if midRecord {
				n++ // a last record without its line break
			}
			return n, io.EOF
		}
		if err != nil {
			return n, err
		}
	}
}

// export writes the caller's links to out, counting them.
func (t transfer) export(ctx context.Context, format, out string, stdout, stderr, progress io.Writer) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.base+"/api/v1/links/export?format="+format, nil)
	if err != nil {
		fmt.Fprintln(stderr, "linknode:", err)
		return 1
	}
	resp, err := t.do(req, "export")
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer resp.Body.Close()
	var w io.Writer = stdout
	var file *os.File
	if out != "-" {
		// Written beside the target and renamed at the end: a cut-short
		// export never stands where a whole one is expected.
		if file, err = os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*"); err != nil {
			fmt.Fprintln(stderr, "linknode:", err)
			return 1
		}
		defer os.Remove(file.Name())
		defer file.Close()
		w = file
	}
	bar := newBar(-1, "exporting", progress)
	body := io.TeeReader(resp.Body, io.MultiWriter(w, bar))
	n := 0
	if format == "csv" {
		n, err = countCSVRecords(body)
		n = max(0, n-1) // the header
	} else {
		br := bufio.NewReader(body)
		for {
			var line []byte
			if line, err = br.ReadSlice('\n'); len(line) > 0 && line[len(line)-1] == '\n' {
				n++
			}
			if err == bufio.ErrBufferFull {
				err = nil
				continue
			}
			if err != nil {
				break
			}
		}
	}
	_ = bar.Finish()
	if err != io.EOF {
		fmt.Fprintln(stderr, "linknode: the export was cut short:", err)
		return 1
	}
	if file != nil {
		if err := putInPlace(file, out); err != nil {
			fmt.Fprintln(stderr, "linknode:", err)
			return 1
		}
		fmt.Fprintf(stdout, "exported %d links to %s\n", n, out)
	} else {
		fmt.Fprintf(stderr, "exported %d links\n", n)
	}
	return 0
}

// putInPlace syncs and closes file, written beside out, and renames it to
// out: a cut-short download never stands where a whole one is expected.
func putInPlace(file *os.File, out string) error {
	if err := file.Sync(); err != nil {
		return err
	}
	if err := file.Close(); err != nil {
		return err
	}
	return os.Rename(file.Name(), out)
}
