package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/httpapi"
	"github.com/linkraft/linkraft/idrange"
	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/internal/clusterkey"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/raftgroup"
	"github.com/linkraft/linkraft/raftgroup/nodelog"
	"github.com/linkraft/linkraft/shard"
)

// Config is the node's configuration: flags, each also read from
// LINKNODE_<NAME> (flag > environment > default).
type Config struct {
	NodeID        string
	DataDir       string
	HTTPAddr      string
	RaftAddr      string
	GossipAddr    string
	AdvertiseHost string
	Join          []string
	// ClusterKeyFile holds the cluster key (linknode keygen).
	ClusterKeyFile string
	// ClusterKey is the key itself, from LINKNODE_CLUSTER_KEY only: a
	// flag value would show in ps.
	ClusterKey string
	// PeerTLSCA, PeerTLSCert and PeerTLSKey replace the key-derived CA of
	// the peer port with an operator's PKI.
	PeerTLSCA, PeerTLSCert, PeerTLSKey string
	// Insecure runs without a cluster key (no peer authentication, gossip
	// in clear).
	Insecure        bool
	BootstrapExpect int
	Shards          int
	Replicas        int
	// FeatureLevel is the feature level the node gossips (0: its
	// version's): lower, it makes the cluster hold back what that level's
	// version cannot apply, ahead of a rollback to it.
	FeatureLevel    int
	PublicURL       string
	CodeMode        string
	MaxURLLength    int
	Blocklist       string
	LogLevel        string
	LogFormat       string
	ShutdownTimeout time.Duration
	// StartTimeout bounds how long the node may take to join or form its
	// cluster (0: as long as it takes; /readyz says what it waits for).
	StartTimeout time.Duration
	// QuotaBytes and MinFreeBytes set the storage alarm (cluster/storage.go).
	QuotaBytes, MinFreeBytes int64
	// MaxConns bounds the HTTP connections open at once (0: half the
	// process's file descriptor limit, at most 10000), so that an HTTP
	// flood cannot take the descriptors Raft needs.
	MaxConns int
	// MaxConnsPerClient bounds one client's HTTP connections (an IPv4
	// address or an IPv6 /64; 0: MaxConns/16, between 64 and 256, at most
	// MaxConns/2); -trusted-proxies are not bounded.
	MaxConnsPerClient int
	// FastRaft shortens Raft timers (tests and local experiments only).
	FastRaft bool
	// AdminAddr is the admin listener: /admin/v1, /metrics, /debug/pprof.
	AdminAddr string
	// AdminKeyFile holds the first admin API key to install (the meta
	// leader making it reads it); AdminKey is that key itself, from
	// LINKNODE_ADMIN_KEY only.
	AdminKeyFile string
	AdminKey     string
	// Pprof serves Go profiles on the admin listener.
	Pprof bool
	// AnonymousCreate lets POST /api/v1/links through without a key.
	AnonymousCreate bool
	// RateLimit, AnonymousRateLimit, RedirectRateLimit and
	// RenderRateLimit are "N/s" or "N/m" ("0": off).
	RateLimit, AnonymousRateLimit, RedirectRateLimit, RenderRateLimit string
	// TrustedProxies are CIDRs whose forwarding headers are believed.
	TrustedProxies []netip.Prefix
	// CORSOrigins are the browser origins allowed to call /api/v1.
	CORSOrigins []string
	// AllowPrivateTargets accepts private and link-local destinations.
	AllowPrivateTargets bool
	// TLSCert and TLSKey serve HTTPS on the public listener.
	TLSCert, TLSKey string
	// Analytics turns click counting on.
	Analytics bool
	// UI serves the web UI under /ui/ on the public listener.
	UI bool
	// FastRedirect serves plain redirects before net/http
	// (package httpapi/fastpath).
	FastRedirect bool
	// ClickBuffer bounds the clicks waiting for the analytics pipeline.
	ClickBuffer int
	// ClickFlush is how often click batches go through Raft.
	ClickFlush time.Duration
	// Visits keeps raw (anonymised) visit records on each node.
	Visits bool
	// VisitRetention is how long visit records are kept.
	VisitRetention time.Duration
	// VisitMaxBytes bounds the raw visit file (0: a quarter of
	// QuotaBytes; -1: none).
	VisitMaxBytes int64
	// ReapAfter removes nodes gossip has seen dead for this long (0: never).
	ReapAfter time.Duration
	// RemoteCacheTTL bounds how long a node serves a cached link of a shard
	// it does not host when no invalidation reaches it.
	RemoteCacheTTL time.Duration
	// StateCommitInterval is how long applied entries wait before a shard's
	// state file commits them (0: every batch).
	StateCommitInterval time.Duration
	// SnapshotThreshold, TrailingLogs, TrailingBytes and SnapshotInterval
	// are every Raft group's snapshot policy (raftgroup.DefaultSnapshots).
	SnapshotThreshold uint64
	TrailingLogs      uint64
	TrailingBytes     int64
	SnapshotInterval  time.Duration
	// RaftLogSegmentBytes is the size of the node's Raft log's segments.
	RaftLogSegmentBytes int64
}

// envName maps a flag name to its environment variable.
func envName(flagName string) string {
	return "LINKNODE_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// lists are the node flags that hold comma-separated lists (a config
// file may give them as arrays).
type lists struct{ join, proxies, origins string }

// listFlags names the flags a config file may give as an array.
var listFlags = map[string]bool{"join": true, "trusted-proxies": true, "cors-origins": true}

// nodeFlags defines a node's flags on a new flag set, writing into c and l.
func nodeFlags(c *Config, l *lists, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("linknode", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		printHelp(out)
		fmt.Fprintln(out, "\nUsage of linknode serve (or linknode [flags]), a node's flags:")
		fs.PrintDefaults()
	}
	fs.StringVar(&c.NodeID, "node-id", "", "stable node ID (default: generated once and kept in the data dir)")
	fs.StringVar(&c.DataDir, "data-dir", "linknode-data", "directory for all of the node's data")
	fs.StringVar(&c.HTTPAddr, "http-addr", ":8080", "HTTP listen address (redirects, API, metrics)")
	fs.StringVar(&c.RaftAddr, "raft-addr", "", "peer listen address, all Raft groups and internal RPC (default :7000 with -join or -bootstrap-expect > 1, else 127.0.0.1:7000)")
	fs.StringVar(&c.GossipAddr, "gossip-addr", "", "gossip (memberlist) listen address (default :7946 with -join or -bootstrap-expect > 1, else 127.0.0.1:7946)")
	fs.StringVar(&c.AdvertiseHost, "advertise-host", "", "host peers use to reach this node (default: the bind host, or 127.0.0.1)")
	fs.StringVar(&l.join, "join", "", "comma-separated gossip addresses of existing nodes")
	fs.StringVar(&c.ClusterKeyFile, "cluster-key-file", "", "file holding the cluster key (make one with linknode keygen); the same on every node. LINKNODE_CLUSTER_KEY may hold the key itself")
	fs.StringVar(&c.PeerTLSCA, "peer-tls-ca", "", "PEM CA bundle for the peer port, instead of the CA derived from the cluster key (with -peer-tls-cert and -peer-tls-key)")
	fs.StringVar(&c.PeerTLSCert, "peer-tls-cert", "", "PEM certificate of this node for the peer port; its Common Name must be the node ID")
	fs.StringVar(&c.PeerTLSKey, "peer-tls-key", "", "PEM private key of -peer-tls-cert")
	fs.BoolVar(&c.Insecure, "insecure", false, "run a multi-node cluster without a cluster key: anyone who reaches the peer or gossip port is trusted (tests and demos only)")
	fs.IntVar(&c.BootstrapExpect, "bootstrap-expect", 1, "how many nodes form the first cluster (1 = single node)")
	fs.IntVar(&c.Shards, "shards", 8, "number of shards, fixed at bootstrap")
	fs.IntVar(&c.Replicas, "replicas", 3, "replicas per shard (capped at the cluster size)")
	fs.IntVar(&c.FeatureLevel, "feature-level", 0, fmt.Sprintf("act as the version of this feature level (1 to %d; 0: this version's) so that the cluster holds back what it cannot apply: set it on every node before rolling back to that version", cluster.FeatureLevel))
	fs.StringVar(&c.PublicURL, "public-url", "", "base of short_url (default http://localhost:<http port>)")
	fs.StringVar(&c.CodeMode, "code-mode", string(idrange.ModePermuted), "generated codes: permuted (7 chars, not sequential) or sequential (shortest); fixed at bootstrap")
	fs.IntVar(&c.MaxURLLength, "max-url-length", link.DefaultMaxURLLength, "longest destination URL accepted, in bytes")
	fs.StringVar(&c.Blocklist, "blocklist", "", "file of blocked destination domains, one per line (subdomains included)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", "text", "text or json")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 10*time.Second, "longest a graceful shutdown may take")
	fs.DurationVar(&c.StartTimeout, "start-timeout", 0, "give up starting after this long (0: wait until the cluster is joined or formed; /readyz says what the node waits for)")
	fs.Int64Var(&c.QuotaBytes, "quota-bytes", cluster.DefaultQuotaBytes, "most bytes of link data (Raft logs, snapshots, state files; raw visits have -visits-max-bytes) the data dir may hold; past it, writes that grow the state are refused with 507 (reads and redirects go on); -1: no quota")
	fs.Int64Var(&c.MinFreeBytes, "min-free-bytes", cluster.DefaultMinFreeBytes, "free space the data dir's file system must keep; below it, writes are refused as over the quota; -1: no floor")
	fs.IntVar(&c.MaxConns, "max-conns", 0, "most HTTP connections open at once; past three quarters, idle keep-alive connections are closed after 1s; past it, new ones get 503 (the last 1% only for /healthz and /readyz) (0: half the file descriptor limit, at most 10000)")
	fs.IntVar(&c.MaxConnsPerClient, "max-conns-per-client", 0, "most HTTP connections one client (an IPv4 address, an IPv6 /64) may hold; more get 429; -trusted-proxies are exempt (0: -max-conns/16, between 64 and 256, at most half -max-conns)")
	fs.StringVar(&c.AdminAddr, "admin-addr", "127.0.0.1:8081", "admin listener: /admin/v1 (admin key), /metrics, /debug/pprof (with -pprof); the public listener answers 404 for them")
	fs.StringVar(&c.AdminKeyFile, "admin-key-file", "", "file holding the first admin API key, installed when the cluster is made (default: made and written to <data-dir>/admin.key); LINKNODE_ADMIN_KEY may hold the key itself")
	fs.BoolVar(&c.Pprof, "pprof", false, "serve Go profiles (net/http/pprof) on the admin listener")
	fs.BoolVar(&c.AnonymousCreate, "anonymous-create", false, "let POST /api/v1/links through without a key (owner \"anonymous\", limited per client by -anonymous-rate-limit): for public shorteners")
	fs.StringVar(&c.RateLimit, "rate-limit", "50/s", "requests per key on /api/v1, as N/s (bursts of 2N) or N/m (bursts of N); 0: none. Per node; admin keys are not limited")
	fs.StringVar(&c.AnonymousRateLimit, "anonymous-rate-limit", "10/m", "anonymous creates per client address (IPv6: per /64), as N/s or N/m; per node")
	fs.StringVar(&c.RenderRateLimit, "render-rate-limit", "5/s", "QR codes (/{code}/qr) and previews (/{code}+) per client address (IPv6: per /64), as N/s (bursts of 2N) or N/m; 0: none. Per node: a render costs milliseconds of CPU")
	fs.StringVar(&c.RedirectRateLimit, "redirect-rate-limit", "0", "GET/HEAD /{code} per client address (IPv6: per /64), as N/s or N/m; 0: none (the default). Per node; with a limit the fast path is off")
	fs.StringVar(&l.proxies, "trusted-proxies", "", "comma-separated CIDRs of reverse proxies whose Forwarded / X-Forwarded-For name the client (nobody else's are read)")
	fs.StringVar(&l.origins, "cors-origins", "", "comma-separated browser origins (https://app.example) allowed to call /api/v1 from their pages; * for any")
	fs.BoolVar(&c.AllowPrivateTargets, "allow-private-targets", false, "accept destinations on private, link-local, metadata and other special-purpose addresses (10/8, 192.168/16, 169.254/16, fc00::/7, NAT64 forms, ...) and names that resolve only inside a network (intranet, *.internal, *.local)")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "PEM certificate (chain) to serve HTTPS with HTTP/2 on -http-addr; reloaded when the file changes")
	fs.StringVar(&c.TLSKey, "tls-key", "", "PEM private key of -tls-cert")
	fs.BoolVar(&c.UI, "ui", true, "serve the web UI under /ui/ on the public listener (sign in with an API key); / sends browsers there")
	fs.BoolVar(&c.FastRedirect, "fast-redirect", true, "answer plain GET/HEAD /{code} redirects before net/http (everything else is net/http's either way)")
	fs.BoolVar(&c.Analytics, "analytics", true, "count clicks (totals, uniques, breakdowns) through the shards' Raft groups")
	fs.IntVar(&c.ClickBuffer, "click-buffer", 1<<16, "clicks that may wait for the analytics pipeline; more are dropped (and counted)")
	fs.DurationVar(&c.ClickFlush, "click-flush", time.Second, "how often each node submits its click batches (the crash-loss bound)")
	fs.BoolVar(&c.Visits, "visits", true, "keep raw visit records (anonymised IP, user agent, referrer, country) on each node")
	fs.DurationVar(&c.VisitRetention, "visit-retention", 30*24*time.Hour, "how long raw visit records are kept")
	fs.Int64Var(&c.VisitMaxBytes, "visits-max-bytes", 0, "most live bytes the raw visit file may hold; past it new raw visits are shed (counted in linkraft_visits_shed_total; click counts are exact either way); 0: a quarter of -quota-bytes (2 GiB without a quota); -1: no bound")
	fs.DurationVar(&c.RemoteCacheTTL, "remote-cache-ttl", 30*time.Second, "how long a node caches links of shards it does not host (the staleness bound after a missed invalidation)")
	fs.DurationVar(&c.ReapAfter, "reap-after", 0, "remove a node dead for this long, as linknode remove would, while the live nodes are at least -replicas (0: never; dead nodes wait for an operator)")
	fs.String("config", "", "a TOML (.toml) or YAML (.yaml, .yml) file of flag values, keyed by flag name (flag > environment > file > default); linknode config print shows the result")
	fs.BoolVar(&c.FastRaft, "fast-raft", false, "short Raft and gossip timers (tests on one machine only)")
	fs.DurationVar(&c.StateCommitInterval, "state-commit-interval", shard.DefaultCommitInterval, "longest applied writes wait before a shard's state file commits them in one fsync; Raft's log already holds them, so a crash loses nothing acknowledged (0: commit every batch before answering, slower)")
	fs.Uint64Var(&c.SnapshotThreshold, "raft-snapshot-threshold", raftgroup.DefaultSnapshots.Threshold, "log entries applied since the last snapshot that make a group snapshot (snapshots are markers: cheap)")
	fs.Uint64Var(&c.TrailingLogs, "raft-trailing-logs", raftgroup.DefaultSnapshots.TrailingLogs, "log entries kept behind a snapshot; a follower further behind is sent the leader's state file")
	fs.Int64Var(&c.TrailingBytes, "raft-trailing-bytes", raftgroup.DefaultSnapshots.TrailingBytes, "about the most bytes of log a group keeps behind a snapshot: fewer than -raft-trailing-logs entries when they are large (a bulk import's), and a snapshot once it holds twice this; -1: entries counted only")
	fs.DurationVar(&c.SnapshotInterval, "raft-snapshot-interval", raftgroup.DefaultSnapshots.Interval, "how often each group checks whether to snapshot (raft adds up to as much again in jitter)")
	fs.Int64Var(&c.RaftLogSegmentBytes, "raft-log-segment-bytes", nodelog.DefaultSegmentSize, "size at which the node's Raft log begins a new segment file (old ones go once nothing in them is live; smaller: less disk, more copying of idle groups' entries)")
	return fs
}

// ParseFlags parses args, with lookupEnv supplying LINKNODE_* values and
// -config (or LINKNODE_CONFIG) a file of them: flag > environment > file >
// default.
func ParseFlags(args []string, lookupEnv func(string) (string, bool), out io.Writer) (Config, error) {
	c, _, err := parseNode(args, lookupEnv, out)
	return c, err
}

// parseNode is ParseFlags that also says where each flag's value came
// from.
func parseNode(args []string, lookupEnv func(string) (string, bool), out io.Writer) (Config, *origins, error) {
	var c Config
	var l lists
	fs := nodeFlags(&c, &l, out)
	fs.Usage = func() {
		printHelp(out)
		fmt.Fprintln(out, "\nUsage of linknode serve (or linknode [flags]), a node's flags:")
		fs.PrintDefaults()
	}
	switch err := quietParse(fs, args); {
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return c, nil, err
	case err != nil:
		return c, nil, fmt.Errorf("%w%s (linknode -h lists every flag)", err, suggestFlag(fs, err))
	}
	o, err := layer(fs, lookupEnv)
	if err != nil {
		return c, o, err
	}
	if fs.NArg() > 0 {
		return c, o, fmt.Errorf("unexpected argument %q: not a subcommand (linknode help lists them)", fs.Arg(0))
	}
	if v, ok := lookupEnv("LINKNODE_CLUSTER_KEY"); ok {
		c.ClusterKey = v
	}
	if v, ok := lookupEnv("LINKNODE_ADMIN_KEY"); ok {
		c.AdminKey = strings.TrimSpace(v)
	}
	for _, p := range splitList(l.proxies) {
		pfx, err := netip.ParsePrefix(p)
		if err != nil {
			a, aerr := netip.ParseAddr(p)
			if aerr != nil {
				return c, o, o.blame(fmt.Errorf("-trusted-proxies %q: want CIDRs such as 10.0.0.0/8", p))
			}
			pfx = netip.PrefixFrom(a, a.BitLen())
		}
		c.TrustedProxies = append(c.TrustedProxies, pfx.Masked())
	}
	c.CORSOrigins = splitList(l.origins)
	if j := strings.TrimSpace(l.join); j != "" {
		for _, a := range strings.Split(j, ",") {
			if a = strings.TrimSpace(a); a != "" {
				c.Join = append(c.Join, a)
			}
		}
	}
	if c.RaftAddr == "" {
		c.RaftAddr = c.defaultBind("7000")
	}
	if c.GossipAddr == "" {
		c.GossipAddr = c.defaultBind("7946")
	}
	return c, o, o.blame(c.validate())
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// ParseRate reads a rate limit: "N/s" (bursts of 2N), "N/m" (bursts of
// N), or "0" for none.
func ParseRate(v string) (httpapi.Rate, error) {
	if v == "0" || v == "off" {
		return httpapi.Rate{PerSecond: -1}, nil
	}
	n, unit, ok := strings.Cut(v, "/")
	count, err := strconv.ParseFloat(n, 64)
	if !ok || err != nil || count <= 0 || count > 1e6 {
		return httpapi.Rate{}, fmt.Errorf("%q: want N/s, N/m or 0", v)
	}
	switch unit {
	case "s":
		return httpapi.Rate{PerSecond: count, Burst: max(1, int(2*count))}, nil
	case "m":
		return httpapi.Rate{PerSecond: count / 60, Burst: max(1, int(count))}, nil
	}
	return httpapi.Rate{}, fmt.Errorf("%q: want N/s, N/m or 0", v)
}

// MultiNode reports whether the node would form or join a cluster of more
// than itself.
func (c *Config) MultiNode() bool { return len(c.Join) > 0 || c.BootstrapExpect > 1 }

// defaultBind is a peer-side bind address: every interface for a node of
// a multi-node cluster, loopback for a single node, so that a node started
// with no flags is reachable on its peer and gossip ports from nowhere but
// its own machine.
func (c *Config) defaultBind(port string) string {
	if c.MultiNode() {
		return ":" + port
	}
	return "127.0.0.1:" + port
}

func (c *Config) validate() error {
	if c.DataDir == "" {
		return errors.New("-data-dir must not be empty")
	}
	for name, addr := range map[string]string{"-http-addr": c.HTTPAddr, "-raft-addr": c.RaftAddr, "-gossip-addr": c.GossipAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("%s %q: %w", name, addr, err)
		}
	}
	if c.BootstrapExpect < 1 || c.BootstrapExpect > 64 {
		return fmt.Errorf("-bootstrap-expect %d: must be 1 to 64", c.BootstrapExpect)
	}
	if c.Shards < 1 || c.Shards > 256 {
		return fmt.Errorf("-shards %d: must be 1 to 256", c.Shards)
	}
	if c.Replicas < 1 || c.Replicas > 7 {
		return fmt.Errorf("-replicas %d: must be 1 to 7", c.Replicas)
	}
	if _, err := idrange.NewCoder(idrange.Mode(c.CodeMode), make([]byte, idrange.KeySize)); err != nil {
		return fmt.Errorf("-code-mode %q: want permuted or sequential", c.CodeMode)
	}
	if c.FeatureLevel < 0 || c.FeatureLevel > cluster.FeatureLevel {
		return fmt.Errorf("-feature-level %d: must be 1 to %d (this version's), or 0 for this version's", c.FeatureLevel, cluster.FeatureLevel)
	}
	for _, r := range c.NodeID {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("-node-id %q: only A-Z a-z 0-9 - _ . may be used", c.NodeID)
		}
	}
	if c.ClusterKeyFile != "" && c.ClusterKey != "" {
		return errors.New("give the cluster key once: -cluster-key-file or LINKNODE_CLUSTER_KEY, not both")
	}
	if c.ClusterKey != "" {
		if _, err := clusterkey.Parse(c.ClusterKey); err != nil {
			return fmt.Errorf("LINKNODE_CLUSTER_KEY: %w", err)
		}
	}
	hasKey := c.ClusterKeyFile != "" || c.ClusterKey != ""
	if c.MultiNode() && !hasKey && !c.Insecure {
		return errors.New("a node that forms or joins a multi-node cluster needs the cluster key: make one with `linknode keygen -o cluster.key`, copy it to every node and give -cluster-key-file cluster.key (or LINKNODE_CLUSTER_KEY); -insecure runs without one, for tests and demos only")
	}
	if hasKey && c.Insecure {
		return errors.New("-insecure and a cluster key contradict each other")
	}
	if (c.PeerTLSCA != "" || c.PeerTLSCert != "" || c.PeerTLSKey != "") && (c.PeerTLSCA == "" || c.PeerTLSCert == "" || c.PeerTLSKey == "") {
		return errors.New("-peer-tls-ca, -peer-tls-cert and -peer-tls-key go together")
	}
	if c.PeerTLSCert != "" && c.Insecure {
		return errors.New("-insecure and -peer-tls-* contradict each other")
	}
	if c.VisitMaxBytes < -1 {
		return errors.New("-visits-max-bytes must be positive, 0 for a quarter of -quota-bytes, or -1 for none")
	}
	if c.QuotaBytes == 0 || c.MinFreeBytes == 0 {
		return errors.New("-quota-bytes and -min-free-bytes must be positive, or -1 for none")
	}
	if c.AdminKey != "" && c.AdminKeyFile != "" {
		return errors.New("give the first admin key once: -admin-key-file or LINKNODE_ADMIN_KEY, not both")
	}
	if c.AdminKey != "" {
		if err := apikey.ValidSecret(c.AdminKey); err != nil {
			return fmt.Errorf("LINKNODE_ADMIN_KEY: %w", err)
		}
	}
	if _, _, err := net.SplitHostPort(c.AdminAddr); err != nil {
		return fmt.Errorf("-admin-addr %q: %w", c.AdminAddr, err)
	}
	for name, v := range map[string]string{"-rate-limit": c.RateLimit, "-anonymous-rate-limit": c.AnonymousRateLimit, "-redirect-rate-limit": c.RedirectRateLimit, "-render-rate-limit": c.RenderRateLimit} {
		if _, err := ParseRate(v); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("-tls-cert and -tls-key go together")
	}
	if c.MaxConnsPerClient < 0 {
		return errors.New("-max-conns-per-client must not be negative")
	}
	if c.MaxConns < 0 {
		return errors.New("-max-conns must not be negative")
	}
	if c.ShutdownTimeout <= 0 {
		return errors.New("-shutdown-timeout must be positive")
	}
	if c.StateCommitInterval < 0 || c.StateCommitInterval > time.Minute {
		return errors.New("-state-commit-interval must be between 0 and 1m")
	}
	if c.RaftLogSegmentBytes < 64<<10 || c.RaftLogSegmentBytes > 1<<30 {
		return errors.New("-raft-log-segment-bytes must be between 64 KiB and 1 GiB")
	}
	if c.SnapshotThreshold < 1 || c.TrailingLogs < 1 || c.SnapshotInterval < 5*time.Millisecond {
		return errors.New("-raft-snapshot-threshold and -raft-trailing-logs must be at least 1, -raft-snapshot-interval at least 5ms")
	}
	if c.TrailingBytes != -1 && (c.TrailingBytes < 64<<10 || c.TrailingBytes > 1<<30) {
		return errors.New("-raft-trailing-bytes must be between 64 KiB and 1 GiB, or -1")
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		return fmt.Errorf("-log-format %q: want text or json", c.LogFormat)
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return fmt.Errorf("-log-level %q: %w", c.LogLevel, err)
	}
	if c.MaxURLLength < 32 || c.MaxURLLength > 1<<20 {
		return fmt.Errorf("-max-url-length %d: must be 32 to 1048576", c.MaxURLLength)
	}
	return nil
}
