package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/linkraft/linkraft/jepsen/checker"
	"github.com/linkraft/linkraft/jepsen/history"
	"github.com/linkraft/linkraft/jepsen/report"
)

// newRunDir makes store/<name>/<timestamp>/ and points store/<name>/latest
// and store/latest at it.
func newRunDir(store, name string) (string, error) {
	ts := time.Now().Format("20060102T150405.000")
	dir := filepath.Join(store, name, ts)
	if err := os.MkdirAll(filepath.Join(dir, "nodes"), 0o755); err != nil {
		return "", err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for _, link := range []struct{ at, target string }{
		{filepath.Join(store, name, "latest"), ts},
		{filepath.Join(store, "latest"), filepath.Join(name, ts)},
	} {
		_ = os.Remove(link.at)
		if err := os.Symlink(link.target, link.at); err != nil {
			return "", err
		}
	}
	return abs, nil
}

// buildLinknode builds ./cmd/linknode of this module into bin.
func buildLinknode(ctx context.Context, bin, tags string, race bool) error {
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	args := []string{"build", "-o", bin}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./cmd/linknode")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build linknode: %w: %s", err, out)
	}
	return nil
}

func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("run the harness from inside the linkraft module (or pass -binary)")
	}
	return filepath.Dir(mod), nil
}

func testRecord(opt Options, workloads, faults []string) map[string]any {
	return map[string]any{
		"name": opt.Name, "nodes": opt.Nodes, "bootstrap_expect": opt.BootstrapExpect, "start_jitter": opt.StartJitter.String(), "time_limit": opt.TimeLimit.String(), "concurrency": opt.Concurrency,
		"rate": opt.Rate, "nemesis": faults, "nemesis_interval": opt.NemesisInterval.String(), "nemesis_first": opt.NemesisFirst, "workloads": workloads,
		"ops_per_key": opt.OpsPerKey, "per_key": opt.PerKey, "op_timeout": opt.OpTimeout.String(), "seed": opt.Seed,
		"build_tags": opt.BuildTags, "race": opt.Race, "bugs": opt.Bugs, "node_args": opt.NodeArgs,
		"loss_percent": opt.LossPercent, "started": time.Now().UTC().Format(time.RFC3339),
	}
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func writeFile(path string, fn func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeArtifacts writes the history, the nemesis log, the final reads, the
// results and the plots.
func writeArtifacts(dir string, ops []history.Op, final checker.Final, out *Outcome, name string) error {
	var nem []history.Op
	for _, op := range ops {
		if op.Process == history.NemesisProcess {
			nem = append(nem, op)
		}
	}
	windows := report.Windows(ops, float64(ops[len(ops)-1].Time)/1e9)
	return errors.Join(
		writeFile(filepath.Join(dir, "history.jsonl"), func(w io.Writer) error { return history.WriteJSONL(w, ops) }),
		writeFile(filepath.Join(dir, "history.edn"), func(w io.Writer) error { return history.WriteEDN(w, ops) }),
		writeFile(filepath.Join(dir, "nemesis.jsonl"), func(w io.Writer) error { return history.WriteJSONL(w, nem) }),
		writeJSON(filepath.Join(dir, "final.json"), final),
		writeJSON(filepath.Join(dir, "results.json"), out),
		report.Latency(filepath.Join(dir, "latency-raw.png"), ops, windows, name),
		report.Rate(filepath.Join(dir, "rate.png"), ops, windows, name),
	)
}
