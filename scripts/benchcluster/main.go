// Command benchcluster measures a local 3-node linkraft cluster on loopback:
// creates/s with concurrent clients spread over the nodes, and failover —
// the time from SIGKILL of the node leading the most shards to the first
// successful write and to the first write into every shard that node led,
// plus redirect errors on the surviving nodes during that window.
//
//	go run ./scripts/benchcluster            (builds linknode itself)
//
// Every load loop is bounded in count and time; it starts its own nodes on
// 127.0.0.1 and stops them by PID.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/shard"
)

var (
	nodes     = flag.Int("nodes", 3, "cluster size")
	shards    = flag.Int("shards", 8, "shard count")
	clients   = flag.String("clients-list", "64", "comma-separated client counts for the create benchmark (empty: none)")
	table     = flag.Bool("table", false, "print the create results as markdown table rows")
	duration  = flag.Duration("duration", 10*time.Second, "length of the create benchmark")
	trials    = flag.Int("trials", 5, "failover trials")
	openRates = flag.String("open-rates", "", "comma-separated offered rates (creates/s) for an open-loop create run with vegeta, after the closed-loop runs (empty: none)")
	vegetaBin = flag.String("vegeta", "vegeta", "the vegeta binary for -open-rates")
	nodeArgs  = flag.String("node-args", "", "extra linknode flags for every node, space-separated (e.g. \"-pprof\")")
	binary    = flag.String("bin", "", "the linknode binary to run (default: build ./cmd/linknode); scripts/bench-compare.sh runs two revisions' binaries under one load generator")
	peerTLS   = flag.Bool("peer-tls", true, "give the nodes a cluster key (mutual TLS on the peer port, encrypted gossip); false runs them -insecure")
	profDir   = flag.String("profile-dir", "", "write each node's CPU profile of the first create run (from its second second to its last) to DIR/<node>.pprof; starts the nodes with -pprof")
	etcdBin   = flag.String("etcd", "", "run etcd (this binary) with -nodes members instead of linknode: the same create load as puts of the same URLs to fresh keys through etcd's JSON gateway (POST /v3/kv/put), for scripts/bench.sh create")
)

type node struct {
	id, dir, http, raft, gossip, admin string
	cmd                                *exec.Cmd
	done                               chan struct{}
}

// adminKey is the cluster's first admin key, made by the benchmark.
var adminKey = func() string {
	k, err := apikey.NewSecret()
	check(err)
	return k
}()

var client = &http.Client{
	Timeout:       5 * time.Second,
	Transport:     &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func freePort() string {
	portsMu.Lock()
	defer portsMu.Unlock()
	for {
		// Below the kernel's ephemeral range (32768 up here): a port picked
		// there can be taken, before the node binds it, as the local port
		// of some outgoing connection.
		p := 21000 + rand.IntN(11000)
		if portsUsed[p] {
			continue
		}
		a := fmt.Sprintf("127.0.0.1:%d", p)
		ln, err := net.Listen("tcp", a)
		if err != nil {
			continue
		}
		ln.Close()
		if pc, err := net.ListenPacket("udp", a); err == nil {
			pc.Close()
			portsUsed[p] = true
			return a
		}
	}
}

// portsUsed are the ports freePort handed out: never twice in one run.
var (
	portsMu   sync.Mutex
	portsUsed = map[int]bool{}
)

func main() {
	flag.Parse()
	work, err := os.MkdirTemp("", "benchcluster-")
	check(err)
	defer os.RemoveAll(work)
	if *etcdBin != "" {
		etcdMain(work)
		return
	}
	bin := *binary
	if bin == "" {
		bin = filepath.Join(work, "linknode")
		build := exec.Command("go", "build", "-tags", "hashicorpmetrics", "-o", bin, "./cmd/linknode")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		check(build.Run())
	}
	c := newCluster(bin, work)
	for _, n := range c.nodes {
		c.start(n)
	}
	stopNodes = c.stop
	defer stopNodes()
	for _, n := range c.nodes {
		waitReady(n)
	}
	if !*table {
		fmt.Printf("machine: %d cores, %s; %d nodes, %d shards, all on 127.0.0.1\n\n", runtime.NumCPU(), runtime.Version(), *nodes, *shards)
	}

	// Creates/s, clients spread over the nodes, per client count.
	for _, conns := range ints(*clients) {
		createLoad(c.nodes, conns)
	}
	// Open loop: vegeta offers a fixed rate whatever the answers take, so
	// queueing shows in the latencies (no coordinated omission).
	if *openRates != "" && *table {
		fmt.Printf("\n| nodes | offered/s | created/s | p50 | p99 | max | created |\n|---|---|---|---|---|---|---|\n")
	}
	for _, rate := range ints(*openRates) {
		openLoad(c.nodes, rate, work)
	}
	if *trials == 0 {
		return
	}
	ring, err := shard.NewRing(shard.RingConfig{Shards: *shards})
	check(err)
	var firstWrite, allShards []time.Duration
	for trial := 0; trial < *trials; trial++ {
		first, all := c.failover(trial, ring)
		firstWrite, allShards = append(firstWrite, first), append(allShards, all)
	}
	slices.Sort(firstWrite)
	slices.Sort(allShards)
	fmt.Printf("\nfailover, median of %d: first write %v, all of the victim's shards writable %v\n",
		*trials, firstWrite[len(firstWrite)/2].Round(time.Millisecond), allShards[len(allShards)/2].Round(time.Millisecond))
}

// cluster is the benchmark's nodes, processes of bin in work.
type cluster struct {
	bin, work string
	nodes     []*node
	gossips   []string
	security  []string
}

func newCluster(bin, work string) *cluster {
	c := &cluster{bin: bin, work: work, nodes: make([]*node, *nodes), security: []string{"-insecure"}}
	for i := range c.nodes {
		c.nodes[i] = &node{id: fmt.Sprintf("n%d", i+1), dir: filepath.Join(work, fmt.Sprintf("n%d", i+1)),
			http: freePort(), raft: freePort(), gossip: freePort(), admin: freePort()}
		c.gossips = append(c.gossips, c.nodes[i].gossip)
	}
	if *peerTLS {
		keyFile := filepath.Join(work, "cluster.key")
		keygen := exec.Command(bin, "keygen", "-o", keyFile)
		if out, err := keygen.CombinedOutput(); err != nil { // on success it only says where the key went
			check(fmt.Errorf("keygen: %v: %s", err, out))
		}
		c.security = []string{"-cluster-key-file", keyFile}
	}
	return c
}

// start starts node n's process.
func (c *cluster) start(n *node) {
	logf, err := os.OpenFile(n.dir+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	check(err)
	n.cmd = exec.Command(c.bin, "-node-id", n.id, "-data-dir", n.dir, "-http-addr", n.http, "-raft-addr", n.raft,
		"-gossip-addr", n.gossip, "-bootstrap-expect", fmt.Sprint(*nodes),
		"-shards", fmt.Sprint(*shards), "-log-level", "warn", "-admin-addr", n.admin)
	// The benchmark's client is the cluster's first admin key: as shipped,
	// every create is authenticated (admin keys are not rate limited; a
	// non-admin key at the default 50/s would be the limit).
	n.cmd.Env = append(os.Environ(), "LINKNODE_ADMIN_KEY="+adminKey)
	if *nodes > 1 { // a single node forms its cluster alone; -join would make it wait to be added
		n.cmd.Args = append(n.cmd.Args, "-join", strings.Join(c.gossips, ","))
	}
	n.cmd.Args = append(n.cmd.Args, c.security...)
	n.cmd.Args = append(n.cmd.Args, strings.Fields(*nodeArgs)...)
	if *profDir != "" {
		n.cmd.Args = append(n.cmd.Args, "-pprof")
	}
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	check(n.cmd.Start())
	n.done = make(chan struct{})
	go func() { _ = n.cmd.Wait(); logf.Close(); close(n.done) }()
}

// stop ends every running node (SIGTERM, by PID) and waits for it.
func (c *cluster) stop() {
	for _, n := range c.nodes {
		select {
		case <-n.done:
		default:
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
			<-n.done
		}
	}
}

// failover runs one failover trial: it kills the node leading the most
// shards and measures the first write after the kill and the first write
// into every shard that node led, with redirect load on the survivors.
func (c *cluster) failover(trial int, ring *shard.Ring) (first, all time.Duration) {
	// Let leadership settle (the nodes rebalance it), then pick the node
	// leading the most shards.
	time.Sleep(3 * time.Second)
	victim, led := c.busiest()
	// One alias per shard the victim leads.
	aliases := map[int]string{}
	for i := 0; len(aliases) < len(led) && i < 1_000_000; i++ {
		a := fmt.Sprintf("fo-%d-%d", trial, i)
		if s := int(ring.Locate(a)); slices.Contains(led, s) && aliases[s] == "" {
			aliases[s] = a
		}
	}
	var survivors []*node
	for _, n := range c.nodes {
		if n != victim {
			survivors = append(survivors, n)
		}
	}
	stopRedirects := redirectLoad(survivors)
	time.Sleep(200 * time.Millisecond)
	kill := time.Now()
	check(victim.cmd.Process.Signal(syscall.SIGKILL))
	<-victim.done
	first, all, stuck := writeAfter(kill, aliases, survivors)
	redirects, redirectErrs := stopRedirects()
	if stuck > 0 {
		fmt.Printf("trial %d: %d writers still failing after 30s\n", trial+1, stuck)
		exit(1)
	}
	fmt.Printf("trial %d: killed %s (leader of %d/%d shards): first write after %v, every shard it led writable after %v; redirects on survivors: %d, errors %d\n",
		trial+1, victim.id, len(led), *shards, first.Round(time.Millisecond), all.Round(time.Millisecond), redirects, redirectErrs)
	c.start(victim)
	waitReady(victim)
	return first, all
}

// busiest returns the node leading the most shards, and those shards.
func (c *cluster) busiest() (*node, []int) {
	leaders := shardLeaders(c.nodes[0])
	count := map[string]int{}
	for _, l := range leaders {
		count[l]++
	}
	var victim *node
	for _, n := range c.nodes {
		if victim == nil || count[n.id] > count[victim.id] {
			victim = n
		}
	}
	var led []int
	for s, l := range leaders {
		if l == victim.id {
			led = append(led, s)
		}
	}
	sort.Ints(led)
	return victim, led
}

// redirectLoad redirects codes created now on the survivors from 4
// workers, each bounded to 10M requests, until the returned stop; codes
// created before the kill must keep redirecting. stop returns the
// redirects and the errors among them.
func redirectLoad(survivors []*node) (stop func() (int64, int64)) {
	var codes []string
	for i := 0; i < 50; i++ {
		if st, body := post(survivors[i%len(survivors)], fmt.Sprintf(`{"url":"https://r.example/%d"}`, i)); st == 201 {
			var m map[string]any
			_ = json.Unmarshal(body, &m)
			codes = append(codes, m["code"].(string))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var redirects, errs atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Go(func() {
			for i := 0; i < 10_000_000 && ctx.Err() == nil; i++ {
				n := survivors[i%len(survivors)]
				resp, err := client.Get("http://" + n.http + "/" + codes[(i+w)%len(codes)])
				redirects.Add(1)
				if err != nil {
					errs.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 302 {
					errs.Add(1)
				}
			}
		})
	}
	return func() (int64, int64) {
		cancel()
		wg.Wait()
		return redirects.Load(), errs.Load()
	}
}

// writeAfter writes, from the kill on, one alias into every shard the
// victim led and 4 generated codes (any shard), each writer retrying for
// at most 30 s until its first success. It returns the first success, the
// last first-success of the aliases, and the writers that never got one.
func writeAfter(kill time.Time, aliases map[int]string, survivors []*node) (first, all time.Duration, stuck int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	writer := func(body string, n *node, every bool) {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if st, _ := post(n, body); st == 201 || st == 409 {
				d := time.Since(kill)
				mu.Lock()
				if first == 0 || d < first {
					first = d
				}
				if every && d > all {
					all = d
				}
				mu.Unlock()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		mu.Lock()
		stuck++
		mu.Unlock()
	}
	for s, a := range aliases {
		wg.Go(func() {
			writer(fmt.Sprintf(`{"url":"https://fo.example/%s","alias":%q}`, a, a), survivors[s%len(survivors)], true)
		})
	}
	for k := 0; k < 4; k++ { // generated codes: any shard
		wg.Go(func() { writer(fmt.Sprintf(`{"url":"https://any.example/%d"}`, k), survivors[k%len(survivors)], false) })
	}
	wg.Wait()
	return first, all, stuck
}

// createLoad runs conns closed-loop clients creating links for -duration
// and prints the rate and latencies.
func createLoad(ns []*node, conns int) {
	ok201, path := 201, "/api/v1/links"
	if *etcdBin != "" {
		ok201, path = 200, "/v3/kv/put"
	}
	var ok, failed atomic.Int64
	var lat []time.Duration
	var latMu sync.Mutex
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	var wg sync.WaitGroup
	if *profDir != "" && *etcdBin == "" {
		profile(ns, &wg)
		*profDir = "" // the first run only
	}
	cpu0 := cpuTicks(ns)
	t0 := time.Now()
	for c := 0; c < conns; c++ {
		wg.Go(func() {
			n := ns[c%len(ns)]
			var mine []time.Duration
			for i := 0; i < 1_000_000 && ctx.Err() == nil; i++ {
				s := time.Now()
				st, _ := postTo(n, path, createBody(c, i))
				if st == ok201 {
					ok.Add(1)
					mine = append(mine, time.Since(s))
				} else if ctx.Err() == nil {
					failed.Add(1)
				}
			}
			latMu.Lock()
			lat = append(lat, mine...)
			latMu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(t0)
	// The servers' CPU (every node, user and system) per create answered.
	cpuPer := 0.0
	if n := ok.Load(); n > 0 {
		cpuPer = float64(cpuTicks(ns)-cpu0) / clockTicks * 1e6 / float64(n)
	}
	slices.Sort(lat)
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }
	if *table {
		fmt.Printf("| %d | %d | %.0f | %s | %s | %d | %.0f µs |\n", len(ns), conns, float64(ok.Load())/elapsed.Seconds(), ms(pct(lat, 50)), ms(pct(lat, 99)), failed.Load(), cpuPer)
		return
	}
	fmt.Printf("creates: %d clients over %d nodes for %v: %d ok, %d failed, %.0f creates/s, p50 %v, p99 %v, servers' CPU %.0f µs a create\n",
		conns, len(ns), duration.String(), ok.Load(), failed.Load(), float64(ok.Load())/elapsed.Seconds(),
		pct(lat, 50), pct(lat, 99), cpuPer)
	for _, n := range ns {
		g := metric(n, "go_goroutines")
		fmt.Printf("  %s after load: %s goroutines, %d established TCP connections\n", n.id, g, estab(n))
	}
}

// clockTicks is the kernel's clock ticks a second (USER_HZ), the unit of
// /proc/PID/stat's CPU times: 100 on Linux.
const clockTicks = 100

// cpuTicks sums the user and system CPU ticks the nodes' processes have
// used (0 for a process /proc no longer has).
func cpuTicks(ns []*node) int64 {
	var total int64
	for _, n := range ns {
		if n.cmd == nil || n.cmd.Process == nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n.cmd.Process.Pid))
		if err != nil {
			continue
		}
		// The fields after the command name, which may hold spaces.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 12 {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			s, _ := strconv.ParseInt(f[12], 10, 64)
			total += u + s
		}
	}
	return total
}

// ints parses a comma-separated list of integers ("1,16,64"; empty: none).
func ints(list string) []int {
	var out []int
	for _, f := range strings.Split(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		var n int
		_, err := fmt.Sscan(f, &n)
		check(err)
		out = append(out, n)
	}
	return out
}

// openLoad offers rate creates/s for -duration through vegeta, spread
// round-robin over the nodes, and prints vegeta's latencies (every request,
// failed ones included) and the share answered 201.
func openLoad(ns []*node, rate int, work string) {
	targets := filepath.Join(work, "targets.json")
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, n := range ns {
		check(enc.Encode(map[string]any{
			"method": "POST", "url": "http://" + n.http + "/api/v1/links",
			"header": map[string][]string{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + adminKey}},
			"body":   []byte(fmt.Sprintf(`{"url":"https://bench.example/open/%d"}`, rate)), // base64, as vegeta reads it
		}))
	}
	check(os.WriteFile(targets, b.Bytes(), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), *duration+time.Minute)
	defer cancel()
	attack := exec.CommandContext(ctx, *vegetaBin, "attack", "-format", "json", "-targets", targets,
		"-rate", fmt.Sprintf("%d/s", rate), "-duration", duration.String(), "-timeout", "30s")
	report := exec.CommandContext(ctx, *vegetaBin, "report", "-type", "json")
	pipe, err := attack.StdoutPipe()
	check(err)
	report.Stdin = pipe
	attack.Stderr, report.Stderr = os.Stderr, os.Stderr
	var out bytes.Buffer
	report.Stdout = &out
	check(report.Start())
	check(attack.Run())
	check(report.Wait())
	var r struct {
		Latencies struct {
			P50 time.Duration `json:"50th"`
			P99 time.Duration `json:"99th"`
			Max time.Duration `json:"max"`
		} `json:"latencies"`
		Requests    int64            `json:"requests"`
		StatusCodes map[string]int64 `json:"status_codes"`
		Duration    time.Duration    `json:"duration"`
		Wait        time.Duration    `json:"wait"`
	}
	check(json.Unmarshal(out.Bytes(), &r))
	created := r.StatusCodes["201"]
	perSec := float64(created) / (r.Duration + r.Wait).Seconds()
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }
	if *table {
		fmt.Printf("| %d | %d | %.0f | %s | %s | %s | %d of %d |\n", len(ns), rate, perSec, ms(r.Latencies.P50), ms(r.Latencies.P99), ms(r.Latencies.Max), created, r.Requests)
		return
	}
	fmt.Printf("open loop: %d creates/s offered over %d nodes for %v: %d of %d created (%.0f/s), p50 %v, p99 %v, max %v\n",
		rate, len(ns), duration.String(), created, r.Requests, perSec, r.Latencies.P50, r.Latencies.P99, r.Latencies.Max)
}

func pct(xs []time.Duration, p int) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	return xs[(len(xs)-1)*p/100].Round(100 * time.Microsecond)
}

// createBody is client c's i-th create: a link to a URL of about the size
// real links have, or for etcd a put of that URL under a key of its own
// (base64, as etcd's JSON gateway takes bytes).
func createBody(c, i int) string {
	url := fmt.Sprintf("https://bench.example/%d/%d", c, i)
	if *etcdBin == "" {
		return `{"url":"` + url + `"}`
	}
	key := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "links/%d/%d", c, i))
	return `{"key":"` + key + `","value":"` + base64.StdEncoding.EncodeToString([]byte(url)) + `"}`
}

func post(n *node, body string) (int, []byte) { return postTo(n, "/api/v1/links", body) }

func postTo(n *node, path, body string) (int, []byte) {
	req, err := http.NewRequest("POST", "http://"+n.http+path, bytes.NewReader([]byte(body)))
	if err != nil {
		return 0, nil
	}
	req.Header.Set("Content-Type", "application/json")
	if *etcdBin == "" { // etcd reads an Authorization header as its own token
		req.Header.Set("Authorization", "Bearer "+adminKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func waitReady(n *node) {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest("GET", "http://"+n.http+"/api/v1/keys", nil)
		req.Header.Set("Authorization", "Bearer "+adminKey)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 { // ready, and the admin key is in
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "%s not ready; the end of its log %s.log:\n", n.id, n.dir)
	if b, err := os.ReadFile(n.dir + ".log"); err == nil {
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		fmt.Fprintln(os.Stderr, strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
	exit(1)
}

// stopNodes ends the nodes this program started (by PID); exit runs it
// before exiting, so that no failure leaves a node behind.
var stopNodes = func() {}

func exit(code int) {
	stopNodes()
	os.Exit(code)
}

func shardLeaders(n *node) map[int]string {
	req, _ := http.NewRequest("GET", "http://"+n.admin+"/admin/v1/cluster", nil)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := client.Do(req)
	check(err)
	defer resp.Body.Close()
	var st struct {
		Shards []struct {
			ID     string `json:"id"`
			Leader string `json:"leader"`
		} `json:"shards"`
	}
	check(json.NewDecoder(resp.Body).Decode(&st))
	out := map[int]string{}
	for _, s := range st.Shards {
		var id int
		fmt.Sscan(s.ID, &id)
		out[id] = s.Leader
	}
	return out
}

func metric(n *node, name string) string {
	resp, err := client.Get("http://" + n.admin + "/metrics")
	if err != nil {
		return "?"
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, name+" ") {
			return strings.TrimPrefix(line, name+" ")
		}
	}
	return "?"
}

// estab counts the process's established TCP sockets from /proc.
func estab(n *node) int {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", n.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", n.cmd.Process.Pid, fd.Name())); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	count := 0
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) > 9 && fields[3] == "01" && inodes[fields[9]] { // 01 = ESTABLISHED
				count++
			}
		}
	}
	return count
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchcluster:", err)
		exit(1)
	}
}

// etcdMain runs the create load against an etcd cluster of -nodes members
// on loopback (fsync on, etcd's defaults otherwise; plain HTTP between its
// members, where linknode's peers speak mutual TLS), in place of linknode.
func etcdMain(work string) {
	c := &cluster{work: work, nodes: make([]*node, *nodes)}
	var initial []string
	for i := range c.nodes {
		c.nodes[i] = &node{id: fmt.Sprintf("e%d", i+1), dir: filepath.Join(work, fmt.Sprintf("e%d", i+1)), http: freePort(), raft: freePort()}
		initial = append(initial, c.nodes[i].id+"=http://"+c.nodes[i].raft)
	}
	for _, n := range c.nodes {
		logf, err := os.OpenFile(n.dir+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		check(err)
		n.cmd = exec.Command(*etcdBin, "--name", n.id, "--data-dir", n.dir,
			"--listen-client-urls", "http://"+n.http, "--advertise-client-urls", "http://"+n.http,
			"--listen-peer-urls", "http://"+n.raft, "--initial-advertise-peer-urls", "http://"+n.raft,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "benchcluster", "--logger", "zap", "--log-level", "warn")
		n.cmd.Stdout, n.cmd.Stderr = logf, logf
		check(n.cmd.Start())
		n.done = make(chan struct{})
		go func() { _ = n.cmd.Wait(); logf.Close(); close(n.done) }()
	}
	stopNodes = c.stop
	defer stopNodes()
	for _, n := range c.nodes {
		waitEtcd(n)
	}
	for _, conns := range ints(*clients) {
		createLoad(c.nodes, conns)
	}
}

// waitEtcd waits until member n answers a put (it has a leader).
func waitEtcd(n *node) {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if st, _ := postTo(n, "/v3/kv/put", `{"key":"cmVhZHk=","value":"MQ=="}`); st == 200 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "etcd %s not ready; log %s.log\n", n.id, n.dir)
	exit(1)
}

// profile starts, in wg, a CPU profile of every node in ns over the create
// run about to start (from its second second to its last), written to
// -profile-dir.
func profile(ns []*node, wg *sync.WaitGroup) {
	check(os.MkdirAll(*profDir, 0o755))
	secs := max(int(duration.Seconds())-2, 1)
	dir := *profDir
	for _, n := range ns {
		wg.Go(func() {
			time.Sleep(time.Second)
			c := &http.Client{Timeout: time.Duration(secs+30) * time.Second}
			resp, err := c.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", n.admin, secs))
			if err != nil {
				fmt.Fprintln(os.Stderr, "profile:", err)
				return
			}
			defer resp.Body.Close()
			f, err := os.Create(filepath.Join(dir, n.id+".pprof"))
			if err != nil {
				fmt.Fprintln(os.Stderr, "profile:", err)
				return
			}
			defer f.Close()
			_, _ = io.Copy(f, resp.Body)
		})
	}
}
