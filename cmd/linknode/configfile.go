package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/BurntSushi/toml"
	"go.yaml.in/yaml/v4"
)

// maxConfigFile bounds a config file: it is read whole.
const maxConfigFile = 1 << 20

// origins says where each node flag's effective value came from: "flag",
// "env LINKNODE_X", "file PATH" or "default".
type origins struct {
	of map[string]string
	// fs is the node's flag set, holding the effective values.
	fs *flag.FlagSet
}

// source is where flag name's value came from.
func (o *origins) source(name string) string {
	if o == nil {
		return "default"
	}
	if s, ok := o.of[name]; ok {
		return s
	}
	return "default"
}

// flagMention finds the flags an error message names.
var flagMention = regexp.MustCompile(`-[a-z][a-z0-9-]+`)

// blame adds to a configuration error where the values of the flags it
// names came from, when that was not the command line: an operator who
// never typed -http-addr learns it was LINKNODE_HTTP_ADDR, or the file.
func (o *origins) blame(err error) error {
	if err == nil || o == nil {
		return err
	}
	var from []string
	seen := map[string]bool{}
	for _, m := range flagMention.FindAllString(err.Error(), -1) {
		name := m[1:]
		src, ok := o.of[name]
		if !ok || seen[name] || src == "flag" {
			continue
		}
		seen[name] = true
		from = append(from, fmt.Sprintf("-%s is set by %s", name, src))
	}
	if len(from) == 0 {
		return err
	}
	return fmt.Errorf("%w (%s)", err, strings.Join(from, "; "))
}

// layer fills in what the command line left unset: from the environment,
// else from the config file (-config, or LINKNODE_CONFIG). Flags set on
// the command line stay as they are.
func layer(fs *flag.FlagSet, lookupEnv func(string) (string, bool)) (*origins, error) {
	o := &origins{of: map[string]string{}, fs: fs}
	fs.Visit(func(f *flag.Flag) { o.of[f.Name] = "flag" })
	path := fs.Lookup("config").Value.String()
	if o.of["config"] == "" {
		if v, ok := lookupEnv(envName("config")); ok && v != "" {
			path = v
			o.of["config"] = "env " + envName("config")
		}
	}
	var file map[string]string
	if path != "" {
		var err error
		if file, err = readConfigFile(fs, path); err != nil {
			return o, err
		}
	}
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || o.of[f.Name] != "" {
			return
		}
		if v, ok := lookupEnv(envName(f.Name)); ok {
			if serr := f.Value.Set(v); serr != nil {
				err = fmt.Errorf("%s=%q: %w", envName(f.Name), v, valueError(f, serr))
			}
			o.of[f.Name] = "env " + envName(f.Name)
			return
		}
		if v, ok := file[f.Name]; ok {
			if serr := f.Value.Set(v); serr != nil {
				err = fmt.Errorf("%s: %s = %q: %w", path, f.Name, v, valueError(f, serr))
			}
			o.of[f.Name] = "file " + path
		}
	})
	return o, err
}

// valueError is a flag's refusal of a value, saying what it wants where
// the flag package says only "parse error".
func valueError(f *flag.Flag, err error) error {
	if g, ok := f.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case time.Duration:
			return fmt.Errorf("%w: want a duration such as \"10s\" or \"1m30s\"", err)
		case int, int64, uint64:
			return fmt.Errorf("%w: want a whole number", err)
		case bool:
			return fmt.Errorf("%w: want true or false", err)
		}
	}
	return err
}

// readConfigFile reads a config file, TOML or YAML by its extension, into
// flag values. Its keys are flag names (http-addr = ":8080"); every key
// must name a node flag, and every value must be a string, number or
// boolean (an array of strings for the list flags). A mistake is refused
// with the file, the key and what to write instead.
func readConfigFile(fs *flag.FlagSet, path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("-config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigFile+1))
	if err != nil {
		return nil, fmt.Errorf("-config %s: %w", path, err)
	}
	if len(data) > maxConfigFile {
		return nil, fmt.Errorf("-config %s: larger than %d bytes: not a config file", path, maxConfigFile)
	}
	raw := map[string]any{}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".toml":
		if _, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&raw); err != nil {
			return nil, fmt.Errorf("-config %s: %w", path, err)
		}
	case ".yaml", ".yml":
		var doc any
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return nil, fmt.Errorf("-config %s: %w", path, err)
		}
		switch d := doc.(type) {
		case nil:
		case map[string]any:
			raw = d
		default:
			return nil, fmt.Errorf("-config %s: want a mapping of flag names to values (http-addr: \":8080\"), not a %T", path, doc)
		}
	default:
		return nil, fmt.Errorf("-config %s: name a .toml, .yaml or .yml file", path)
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make(map[string]string, len(raw))
	for _, k := range keys {
		if fs.Lookup(k) == nil || k == "config" {
			return nil, fmt.Errorf("-config %s: unknown key %q%s", path, k, keyHint(fs, k))
		}
		v, err := flagText(k, raw[k])
		if err != nil {
			return nil, fmt.Errorf("-config %s: %s: %w", path, k, err)
		}
		out[k] = v
	}
	return out, nil
}

// keyHint says what to write instead of an unknown config key.
func keyHint(fs *flag.FlagSet, k string) string {
	switch k {
	case "config":
		return ": a config file cannot name another"
	case "cluster-key", "admin-key":
		return fmt.Sprintf(": secrets stay out of config files; give %s-file, or LINKNODE_%s", k, strings.ToUpper(strings.ReplaceAll(k, "-", "_")))
	}
	if s := suggestFlag(fs, errors.New("flag provided but not defined: -"+k)); s != "" {
		return strings.Replace(s, "-", "", 1)
	}
	return " (keys are flag names: linknode -h lists them)"
}

// flagText is a config value as the flag's text.
func flagText(name string, v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case []any:
		if !listFlags[name] {
			return "", errors.New("takes one value, not a list")
		}
		items := make([]string, 0, len(x))
		for _, it := range x {
			s, ok := it.(string)
			if !ok || strings.Contains(s, ",") {
				return "", fmt.Errorf("want a list of strings without commas, got %v", it)
			}
			items = append(items, s)
		}
		return strings.Join(items, ","), nil
	case nil:
		return "", errors.New("has no value: give one, or leave the key out for the default")
	}
	return "", fmt.Errorf("want a string, number or boolean, not %T (durations and sizes are strings: \"10s\")", v)
}

// runConfig is linknode config print [node flags]: every node flag's
// effective value and where it came from, as the node would start with the
// same flags, environment and -config file. It exits 1 when the result
// would not start.
func runConfig(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	usage := func(w io.Writer) {
		fmt.Fprintln(w, "Usage of linknode config: linknode config print [-format table|toml] [node flags, e.g. -config linknode.toml]")
		fmt.Fprintln(w, "Every node flag's effective value and where it came from: flag, env LINKNODE_*, file, or default.")
		fmt.Fprintln(w, "-format toml writes the values as a config file to start from. Exit 1 when the node would refuse them.")
	}
	if len(args) == 0 || args[0] != "print" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			usage(stderr)
			return 0
		}
		usage(stderr)
		return 2
	}
	args = args[1:]
	format := "table"
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-h" || a == "-help" || a == "--help":
			usage(stderr)
			return 0
		case a == "-format" || a == "--format":
			if i+1 >= len(args) {
				fmt.Fprintln(stderr, "linknode config print: -format needs table or toml")
				return 2
			}
			format = args[i+1]
			i++
		case strings.HasPrefix(a, "-format=") || strings.HasPrefix(a, "--format="):
			format = a[strings.Index(a, "=")+1:]
		default:
			rest = append(rest, a)
		}
	}
	if format != "table" && format != "toml" {
		fmt.Fprintf(stderr, "linknode config print: -format %q: want table or toml\n", format)
		return 2
	}
	c, o, err := parseNode(rest, lookupEnv, io.Discard)
	if o == nil {
		fmt.Fprintln(stderr, "linknode config print:", err)
		return 2
	}
	fs := o.fs
	// The peer listeners' defaults depend on the other flags: show what
	// the node would bind.
	for name, v := range map[string]string{"raft-addr": c.RaftAddr, "gossip-addr": c.GossipAddr} {
		if f := fs.Lookup(name); f.Value.String() == "" && v != "" {
			_ = f.Value.Set(v)
		}
	}
	switch format {
	case "toml":
		fmt.Fprintf(stdout, "# linknode config: linknode -config FILE (flag > environment > file > default)\n")
		fs.VisitAll(func(f *flag.Flag) {
			if f.Name == "config" {
				return
			}
			src := o.source(f.Name)
			if src == "default" {
				fmt.Fprintf(stdout, "# %s = %s\n", f.Name, tomlValue(f))
				return
			}
			fmt.Fprintf(stdout, "%s = %s # %s\n", f.Name, tomlValue(f), src)
		})
	default:
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "FLAG\tVALUE\tFROM")
		fs.VisitAll(func(f *flag.Flag) {
			v := f.Value.String()
			if v == "" {
				v = `""`
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Name, cell(v), cell(o.source(f.Name)))
		})
		for _, s := range []string{"LINKNODE_CLUSTER_KEY", "LINKNODE_ADMIN_KEY"} {
			if _, ok := lookupEnv(s); ok {
				fmt.Fprintf(tw, "%s\t(set, not shown)\tenv\n", s)
			}
		}
		_ = tw.Flush()
	}
	if err != nil {
		fmt.Fprintln(stderr, "linknode config print: the node would not start:", err)
		return 1
	}
	return 0
}

// tomlValue is a flag's value as a TOML value: booleans and integers bare,
// the list flags as arrays, everything else a string.
func tomlValue(f *flag.Flag) string {
	v := f.Value.String()
	if listFlags[f.Name] {
		parts := splitList(v)
		q := make([]string, len(parts))
		for i, p := range parts {
			q[i] = strconv.Quote(p)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
		return v
	}
	if _, err := strconv.ParseInt(v, 10, 64); err == nil {
		return v
	}
	return strconv.Quote(v)
}
