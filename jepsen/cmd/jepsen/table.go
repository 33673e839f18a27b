package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/linkraft/linkraft/jepsen"
	"github.com/linkraft/linkraft/jepsen/checker"
)

// table prints one Markdown row per run folder: what ran, how many client
// operations completed (ok/fail/info), which faults were injected, and the
// verdict with the anomalies found.
func table(dirs []string, stdout, stderr io.Writer) int {
	if len(dirs) == 0 {
		fmt.Fprintln(stderr, "usage: jepsen table RUN_DIR...")
		return exitBadArgs
	}
	fmt.Fprintln(stdout, "| run | nodes | time | nemesis | workloads | client ops (ok / fail / info) | faults injected (shown effective) | valid | anomalies |")
	fmt.Fprintln(stdout, "|---|---|---|---|---|---|---|---|---|")
	code := exitValid
	for _, dir := range dirs {
		var test struct {
			Nodes     int      `json:"nodes"`
			TimeLimit string   `json:"time_limit"`
			Nemesis   []string `json:"nemesis"`
			Workloads []string `json:"workloads"`
			Race      bool     `json:"race"`
		}
		var out jepsen.Outcome
		if err := readJSON(filepath.Join(dir, "test.json"), &test); err != nil {
			fmt.Fprintln(stderr, err)
			code = exitHarness
			continue
		}
		if err := readJSON(filepath.Join(dir, "results.json"), &out); err != nil {
			fmt.Fprintln(stderr, err)
			code = exitHarness
			continue
		}
		var ok, fail, info int
		var anomalies []string
		for _, r := range out.Results {
			if r.Checker == "stats" {
				for k, n := range r.Stats {
					switch {
					case strings.HasSuffix(k, "/ok"):
						ok += n
					case strings.HasSuffix(k, "/fail"):
						fail += n
					case strings.HasSuffix(k, "/info"):
						info += n
					}
				}
			}
			if r.Valid != checker.Valid {
				anomalies = append(anomalies, fmt.Sprintf("%s: %s", r.Checker, r.Summary))
			}
		}
		var faults []string
		total, effective := 0, 0
		for f, n := range out.Faults {
			faults = append(faults, fmt.Sprintf("%s×%d", f, n.Injected))
			total += n.Injected
			effective += n.Effective
		}
		sort.Strings(faults)
		nem := strings.Join(test.Nemesis, " ")
		if len(test.Nemesis) > 6 {
			nem = fmt.Sprintf("%d faults", len(test.Nemesis))
		}
		if len(test.Nemesis) == 0 {
			nem = "none"
		}
		race := ""
		if test.Race {
			race = " (race)"
		}
		an := strings.Join(anomalies, "; ")
		if an == "" {
			an = "none"
		}
		fmt.Fprintf(stdout, "| %s%s | %d | %s | %s | %s | %d (%d / %d / %d) | %d (%d): %s | %s | %s |\n",
			filepath.Base(filepath.Dir(dir))+" "+filepath.Base(dir), race, test.Nodes, test.TimeLimit, nem, strings.Join(test.Workloads, " "),
			ok+fail+info, ok, fail, info, total, effective, strings.Join(faults, " "), out.Valid, an)
	}
	return code
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
