package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/httpapi"
	"github.com/linkraft/linkraft/httpapi/fastpath"
	"github.com/linkraft/linkraft/httpapi/webui"
	"github.com/linkraft/linkraft/idrange"
	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/internal/certfile"
	"github.com/linkraft/linkraft/internal/clusterkey"
	"github.com/linkraft/linkraft/internal/connguard"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/metrics"
	"github.com/linkraft/linkraft/raftgroup"
)

// Main is a running node: the cluster node, its HTTP server and metrics. It
// is a value so that tests can start nodes in-process on :0 ports.
type Main struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics.Metrics

	node      *cluster.Node
	adminLn   net.Listener
	adminSrv  *http.Server
	adminDone chan struct{}
	httpLn    net.Listener
	httpGuard *connguard.Listener // httpLn under its connection caps
	adminGrd  *connguard.Listener // adminLn under its connection caps
	httpSrv   *http.Server
	httpFast  *fastpath.Listener // nil with -fast-redirect=false
	httpDone  chan struct{}

	lock *dataDirLock

	closeOnce sync.Once
	closeErr  error
}

// NewMain returns a Main that logs to logOut.
func NewMain(cfg Config, logOut io.Writer) *Main {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler = slog.NewTextHandler(logOut, opts)
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(logOut, opts)
	}
	return &Main{cfg: cfg, log: slog.New(h), metrics: metrics.New()}
}

// Logger returns the node's logger.
func (m *Main) Logger() *slog.Logger { return m.log }

// HTTPAddr returns the bound HTTP address (after Run).
func (m *Main) HTTPAddr() string { return m.httpLn.Addr().String() }

// AdminAddr returns the bound admin listener address (after Run).
func (m *Main) AdminAddr() string { return m.adminLn.Addr().String() }

// Node returns the cluster node (after Run).
func (m *Main) Node() *cluster.Node { return m.node }

// Run starts the node and serves HTTP; it returns once the node is open and
// the HTTP listener is bound.
func (m *Main) Run(ctx context.Context) error {
	cfg := m.cfg
	blocklist, err := m.loadBlocklist()
	if err != nil {
		return err
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("-data-dir %s: %w", cfg.DataDir, err)
	}
	// One node a data dir: a second is refused before it binds or opens
	// anything.
	if m.lock, err = lockDataDir(dataDir); err != nil {
		return err
	}
	// Bind HTTP first so a port clash fails before any Raft state is made.
	if m.httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return listenError("-http-addr", cfg.HTTPAddr, err)
	}
	if m.adminLn, err = net.Listen("tcp", cfg.AdminAddr); err != nil {
		return listenError("-admin-addr", cfg.AdminAddr, err)
	}
	var certs *certfile.Reloader
	if cfg.TLSCert != "" {
		if certs, err = certfile.New(certfile.Config{CertFile: cfg.TLSCert, KeyFile: cfg.TLSKey, Logger: m.log}); err != nil {
			return fmt.Errorf("-tls-cert %s, -tls-key %s: %w: give a PEM certificate and the private key it was issued for, both readable by this user", cfg.TLSCert, cfg.TLSKey, err)
		}
	}
	ncfg, err := m.nodeConfig(dataDir)
	if err != nil {
		return err
	}
	node, err := cluster.New(ncfg)
	if err != nil {
		return err
	}
	m.guardListeners(certs != nil)
	if err := m.openNode(ctx, node); err != nil {
		return err
	}
	if err := m.registerGauges(node.Admin()); err != nil {
		return err
	}
	publicURL := m.publicURL(certs != nil)
	api, err := m.newAPI(node, publicURL, blocklist)
	if err != nil {
		return err
	}
	handler, err := m.newUI(api, node, ncfg.ClusterKey, publicURL)
	if err != nil {
		return err
	}
	m.serveHTTP(api, handler, m.httpGuard, certs)
	m.serveAdmin(api)
	m.log.Info("linknode ready", "http", m.httpLn.Addr().String(), "admin", m.adminLn.Addr().String(), "public_url", publicURL,
		"tls", certs != nil, "raft", node.RaftAddr(), "data_dir", dataDir, "version", version)
	return nil
}

// loadBlocklist reads -blocklist, if given.
func (m *Main) loadBlocklist() (map[string]struct{}, error) {
	if m.cfg.Blocklist == "" {
		return nil, nil
	}
	f, err := os.Open(m.cfg.Blocklist)
	if err != nil {
		return nil, fmt.Errorf("-blocklist: %w: give a readable file of domains, one a line, or drop -blocklist", err)
	}
	defer f.Close()
	blocklist, err := link.ReadBlocklist(f)
	if err != nil {
		return nil, fmt.Errorf("-blocklist %s: %w: fix or remove that line", m.cfg.Blocklist, err)
	}
	m.log.Info("blocklist loaded", "domains", len(blocklist))
	return blocklist, nil
}

// publicURL is -public-url, or the HTTP listener on localhost.
func (m *Main) publicURL(tls bool) string {
	if m.cfg.PublicURL != "" {
		return m.cfg.PublicURL
	}
	_, port, _ := net.SplitHostPort(m.httpLn.Addr().String())
	scheme := "http"
	if tls {
		scheme = "https"
	}
	u := scheme + "://localhost:" + port
	if !loopbackOnly(m.httpLn.Addr().String()) {
		m.log.Warn("-public-url is not set: short URLs name localhost, which other machines cannot open; set -public-url to the address clients use",
			"http_addr", m.httpLn.Addr().String(), "short_url_base", u)
	}
	return u
}

// loopbackOnly reports whether a listener bound to addr is reachable from
// this machine alone.
func loopbackOnly(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// nodeConfig is the cluster node's configuration from the flags.
func (m *Main) nodeConfig(dataDir string) (cluster.Config, error) {
	cfg := m.cfg
	httpAdvertise, err := cluster.AdvertiseAddr(m.httpLn.Addr().String(), cfg.AdvertiseHost)
	if err != nil {
		return cluster.Config{}, err
	}
	ncfg := cluster.Config{
		NodeID: cfg.NodeID, DataDir: dataDir, RaftAddr: cfg.RaftAddr, AdvertiseHost: cfg.AdvertiseHost,
		HTTPAddr: httpAdvertise, GossipAddr: cfg.GossipAddr, Join: cfg.Join,
		PeerTLSCA: cfg.PeerTLSCA, PeerTLSCert: cfg.PeerTLSCert, PeerTLSKey: cfg.PeerTLSKey, Insecure: cfg.Insecure,
		QuotaBytes: cfg.QuotaBytes, MinFreeBytes: cfg.MinFreeBytes,
		FastGossip: cfg.FastRaft, BootstrapExpect: cfg.BootstrapExpect,
		Shards: cfg.Shards, ReplicationFactor: cfg.Replicas, CodeMode: idrange.Mode(cfg.CodeMode),
		RemoteCacheTTL: cfg.RemoteCacheTTL, ReapAfter: cfg.ReapAfter, Observer: m.metrics, Logger: m.log,
		AdminKey:     cfg.AdminKey,
		Snapshots:    raftgroup.SnapshotPolicy{Threshold: cfg.SnapshotThreshold, TrailingLogs: cfg.TrailingLogs, TrailingBytes: cfg.TrailingBytes, Interval: cfg.SnapshotInterval},
		FeatureLevel: cfg.FeatureLevel, RaftLogSegmentBytes: cfg.RaftLogSegmentBytes,
	}
	if ncfg.StateCommitInterval = cfg.StateCommitInterval; ncfg.StateCommitInterval == 0 {
		ncfg.StateCommitInterval = -1 // every batch
	}
	if cfg.FastRaft {
		ncfg.Timing = raftgroup.FastTiming
	}
	if cfg.Analytics {
		ncfg.Analytics = &cluster.AnalyticsConfig{
			Visits: cfg.Visits, VisitRetention: cfg.VisitRetention, VisitMaxBytes: cfg.VisitMaxBytes, Buffer: cfg.ClickBuffer,
			FlushInterval: cfg.ClickFlush, CloseTimeout: cfg.ShutdownTimeout / 4, Observer: m.metrics,
		}
	}
	// The admin key first: a bad one is refused before a fresh data dir
	// gets its cluster key.
	if cfg.AdminKeyFile != "" {
		ncfg.AdminKey, err = apikey.LoadSecret(cfg.AdminKeyFile)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return cluster.Config{}, fmt.Errorf("-admin-key-file %s: no such file: make one with linknode keygen -o cluster.key -keep -admin-o %s, or drop -admin-key-file (the node then makes one in the data dir)", cfg.AdminKeyFile, cfg.AdminKeyFile)
		case errors.Is(err, os.ErrPermission):
			return cluster.Config{}, fmt.Errorf("-admin-key-file %s: permission denied: make it readable by the user linknode runs as (uid %d), keeping mode 600", cfg.AdminKeyFile, os.Getuid())
		case err != nil:
			return cluster.Config{}, fmt.Errorf("-admin-key-file: %w", err)
		}
	}
	if ncfg.ClusterKey, err = m.clusterKey(dataDir); err != nil {
		return cluster.Config{}, err
	}
	return ncfg, nil
}

// openNode opens node. While it starts (it may wait to join, or to form,
// for as long as it takes), /healthz and /readyz already answer on both
// listeners, and /readyz says what the node waits for: linknode status
// gets the reason, not a hang.
func (m *Main) openNode(ctx context.Context, node *cluster.Node) error {
	admin := node.Admin()
	stopEarly := startingServer(earlyConfig{Limited: m.httpGuard, Status: admin.Starting})
	stopEarlyAdmin := startingServer(earlyConfig{Limited: m.adminGrd, Status: admin.Starting})
	openCtx, cancel := context.WithCancel(ctx)
	if m.cfg.StartTimeout > 0 {
		openCtx, cancel = context.WithTimeout(ctx, m.cfg.StartTimeout)
	}
	defer cancel()
	err := node.Open(openCtx)
	stopEarly()
	stopEarlyAdmin()
	if err != nil && m.cfg.StartTimeout > 0 && errors.Is(openCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		return fmt.Errorf("gave up after -start-timeout %s while %s: %w (check -join and the other nodes' -gossip-addr, or raise -start-timeout)",
			m.cfg.StartTimeout, admin.Starting(), err)
	}
	if err != nil {
		return err
	}
	m.node = node
	return nil
}

// registerGauges gives the metrics the node's storage and apply health.
func (m *Main) registerGauges(admin *cluster.Admin) error {
	return m.metrics.RegisterNode(metrics.NodeGauges{
		StorageAlarm: func() bool { return admin.Storage().Alarm },
		StorageUsed:  func() int64 { return admin.Storage().UsedBytes },
		StorageFree:  func() int64 { return admin.Storage().FreeBytes },
		VisitBytes:   func() int64 { return admin.Storage().VisitBytes },
		VisitsShed:   func() uint64 { return admin.Storage().VisitsShed },
		PeerRefused:  admin.PeerConnsRefused,
		Rejected:     func() uint64 { r, _, _ := admin.ApplyHealth(); return r },
		Halted:       func() int { _, h, _ := admin.ApplyHealth(); return h },
		Stalled:      func() int { _, _, s := admin.ApplyHealth(); return s },
		RaftLog:      admin.RaftLog, RaftLogSegments: admin.RaftLogSegments,
	})
}

// newAPI is the HTTP layer over node's roles.
func (m *Main) newAPI(node *cluster.Node, publicURL string, blocklist map[string]struct{}) (*httpapi.Server, error) {
	cfg := m.cfg
	keyRate, err := ParseRate(cfg.RateLimit)
	if err != nil {
		return nil, err
	}
	anonRate, err := ParseRate(cfg.AnonymousRateLimit)
	if err != nil {
		return nil, err
	}
	redirRate, err := ParseRate(cfg.RedirectRateLimit)
	if err != nil {
		return nil, err
	}
	renderRate, err := ParseRate(cfg.RenderRateLimit)
	if err != nil {
		return nil, err
	}
	hcfg := httpapi.Config{
		Links: node.Links(), Keys: node.Keys(), Admin: node.Admin(), Analytics: node.Analytics(), PublicURL: publicURL,
		URLPolicy: link.URLPolicy{MaxLength: cfg.MaxURLLength, Blocklist: blocklist, AllowPrivate: cfg.AllowPrivateTargets},
		Metrics:   m.metrics.Handler(), Recorder: m.metrics, Logger: m.log,
		AnonymousCreate: cfg.AnonymousCreate, KeyRate: keyRate, AnonymousRate: anonRate, RedirectRate: redirRate,
		RenderRate: renderRate, TrustedProxies: cfg.TrustedProxies, CORSOrigins: cfg.CORSOrigins, Pprof: cfg.Pprof,
	}
	if clicks := node.Analytics().Recorder(); clicks != nil {
		hcfg.Clicks = clicks
	}
	return httpapi.New(hcfg)
}

// newUI returns the public listener's handler: api with the web UI in
// front (package httpapi/webui), or api alone with -ui=false. Sessions are
// signed with a key derived from the cluster key, so that one is good on
// every node; without a cluster key (-insecure) the key is this process's
// own, and a restart signs everyone out.
func (m *Main) newUI(api *httpapi.Server, node *cluster.Node, key *clusterkey.Key, publicURL string) (http.Handler, error) {
	if !m.cfg.UI {
		return api, nil
	}
	var secret []byte
	if key != nil {
		secret = key.SessionKey()
	} else {
		secret = make([]byte, 32)
		_, _ = rand.Read(secret) // crypto/rand never fails
		m.log.Warn("web ui sessions are signed with a key of this process alone (-insecure): they end when it restarts and are not good on other nodes")
	}
	ui, err := webui.New(webui.Config{API: api, Admin: api.Admin(), Keys: node.Keys(), Secret: secret, PublicURL: publicURL, Logger: m.log})
	if err != nil {
		return nil, err
	}
	m.log.Info("web ui on", "url", strings.TrimRight(publicURL, "/")+"/ui/")
	return webui.Mount(ui, api), nil
}

// guardListeners puts both HTTP listeners under their connection caps
// (internal/connguard): the public one under -max-conns in all and
// -max-conns-per-client per client, the admin one under 64 in all and 32
// per client. The last slots of each are kept for /healthz and /readyz.
func (m *Main) guardListeners(tls bool) {
	maxConns := cmp.Or(m.cfg.MaxConns, defaultMaxConns())
	var refuse func(net.Conn, connguard.Reason)
	if !tls {
		refuse = func(c net.Conn, r connguard.Reason) { httpapi.RefuseConn(c, r) }
	}
	// A trusted proxy speaks for many clients: no per-client cap.
	proxy := func(a netip.Addr) bool {
		for _, p := range m.cfg.TrustedProxies {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	m.httpGuard = connguard.New(m.httpLn, connguard.Config{Max: maxConns, PerClient: m.cfg.MaxConnsPerClient, Exempt: proxy, Refuse: refuse,
		Name: "http", Logger: m.log})
	m.adminGrd = connguard.New(m.adminLn, connguard.Config{Max: 64, PerClient: 32, Reserve: 4,
		Refuse: func(c net.Conn, r connguard.Reason) { httpapi.RefuseConn(c, r) }, Name: "admin", Logger: m.log})
	st := m.httpGuard.Config()
	m.log.Info("http connection limits", "max_conns", st.Max, "max_conns_per_client", st.PerClient, "reserved_for_health", st.Reserve)
	m.metrics.RegisterConnGuard("http", m.httpGuard.Stats)
	m.metrics.RegisterConnGuard("admin", m.adminGrd.Stats)
}

// connIdle tells a connection's guard whether it waits for a request
// (net/http's ConnState hook).
func connIdle(c net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew, http.StateIdle:
		connguard.SetIdle(c, true)
	case http.StateActive:
		connguard.SetIdle(c, false)
	}
}

// serveHTTP serves the public listener: the redirect fast path in front
// of net/http (net/http alone with TLS, or -fast-redirect=false).
func (m *Main) serveHTTP(api *httpapi.Server, handler http.Handler, limited *connguard.Listener, certs *certfile.Reloader) {
	m.httpSrv = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(m.log.Handler(), slog.LevelWarn),
		ConnState:         connIdle,
	}
	serveLn := net.Listener(limited)
	if certs != nil {
		m.httpSrv.TLSConfig = certs.TLSConfig()
	}
	// The fast path reads plain HTTP/1.1; with TLS, net/http serves all.
	if m.cfg.FastRedirect && certs == nil {
		m.httpFast = api.FastListener(serveLn, fastpath.Options{
			ReadHeaderTimeout: m.httpSrv.ReadHeaderTimeout, IdleTimeout: m.httpSrv.IdleTimeout,
			WriteTimeout: m.httpSrv.WriteTimeout, Logger: m.log,
		})
		serveLn = m.httpFast
	}
	m.httpDone = make(chan struct{})
	go func() {
		defer close(m.httpDone)
		var err error
		if certs != nil {
			err = m.httpSrv.ServeTLS(serveLn, "", "")
		} else {
			err = m.httpSrv.Serve(serveLn)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("http server stopped", "err", err)
		}
	}()
}

// serveAdmin serves the admin listener.
func (m *Main) serveAdmin(api *httpapi.Server) {
	m.adminSrv = &http.Server{Handler: api.Admin(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10, ErrorLog: slog.NewLogLogger(m.log.Handler(), slog.LevelWarn),
		ConnState: connIdle}
	m.adminDone = make(chan struct{})
	go func() {
		defer close(m.adminDone)
		if err := m.adminSrv.Serve(m.adminGrd); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("admin http server stopped", "err", err)
		}
	}()
}

// Close drains HTTP (in-flight requests get up to half the shutdown budget),
// then stops the Raft groups and closes the bbolt files.
func (m *Main) Close() error {
	m.closeOnce.Do(func() {
		var errs []error
		if m.httpSrv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), m.cfg.ShutdownTimeout/2)
			if err := m.httpSrv.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("http drain: %w", err))
				_ = m.httpSrv.Close()
			}
			if m.httpFast != nil {
				if err := m.httpFast.Shutdown(ctx); err != nil {
					errs = append(errs, fmt.Errorf("http drain (fast path): %w", err))
				}
			}
			cancel()
			<-m.httpDone
		} else if m.httpLn != nil {
			_ = m.httpLn.Close()
		}
		if m.adminSrv != nil {
			_ = m.adminSrv.Close()
			<-m.adminDone
		} else if m.adminLn != nil {
			_ = m.adminLn.Close()
		}
		if m.node != nil {
			errs = append(errs, m.node.Close())
		}
		m.lock.unlock()
		m.closeErr = errors.Join(errs...)
	})
	return m.closeErr
}

// clusterKey returns the cluster key from -cluster-key-file or
// LINKNODE_CLUSTER_KEY. A single node given neither keeps its own key in
// <data-dir>/cluster.key (made on first start, mode 0600; copy it to the
// nodes that join it later). With -insecure there is none.
func (m *Main) clusterKey(dataDir string) (*clusterkey.Key, error) {
	cfg := m.cfg
	switch {
	case cfg.ClusterKeyFile != "":
		k, err := clusterkey.Load(cfg.ClusterKeyFile)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("-cluster-key-file %s: no such file: copy the cluster's key there from another node (a new cluster: linknode keygen -o %s)", cfg.ClusterKeyFile, cfg.ClusterKeyFile)
		case errors.Is(err, os.ErrPermission):
			return nil, fmt.Errorf("-cluster-key-file %s: permission denied: make it readable by the user linknode runs as (uid %d), keeping mode 600", cfg.ClusterKeyFile, os.Getuid())
		case err != nil:
			return nil, fmt.Errorf("-cluster-key-file: %w", err)
		}
		m.log.Info("cluster key loaded", "file", cfg.ClusterKeyFile, "key_id", k.ID())
		return &k, nil
	case cfg.ClusterKey != "":
		k, err := clusterkey.Parse(cfg.ClusterKey)
		if err != nil {
			return nil, fmt.Errorf("LINKNODE_CLUSTER_KEY: %w", err)
		}
		m.log.Info("cluster key from LINKNODE_CLUSTER_KEY", "key_id", k.ID())
		return &k, nil
	case cfg.Insecure:
		m.log.Warn("running without a cluster key (-insecure): anyone who reaches the peer or gossip port can join the cluster and rewrite its data",
			"raft_addr", cfg.RaftAddr, "gossip_addr", cfg.GossipAddr)
		return nil, nil
	case cfg.MultiNode():
		return nil, errors.New("a multi-node cluster needs -cluster-key-file (linknode keygen)")
	}
	p := filepath.Join(dataDir, "cluster.key")
	k, err := clusterkey.Load(p)
	if errors.Is(err, os.ErrPermission) {
		return nil, fmt.Errorf("-data-dir %s: cannot read %s: the data dir belongs to another user: chown -R it to the user linknode runs as (uid %d)", dataDir, p, os.Getuid())
	}
	if errors.Is(err, os.ErrNotExist) {
		if k, err = clusterkey.Generate(); err != nil {
			return nil, err
		}
		if err := clusterkey.Save(p, k); err != nil {
			return nil, fmt.Errorf("save the cluster key: %w", err)
		}
		m.log.Info("made a cluster key for this node; give it to nodes that join (-cluster-key-file)", "file", p, "key_id", k.ID())
		return &k, nil
	}
	if err != nil {
		return nil, err
	}
	return &k, nil
}

// listenError says which flag's address could not be bound, and what to
// do about it.
func listenError(flagName, addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s %s: the address is in use (another linknode?): stop what listens there or choose another %s", flagName, addr, flagName)
	}
	return fmt.Errorf("%s %s: %w", flagName, addr, err)
}

// defaultMaxConns is half the process's open-file limit, between 64 and
// 10000: the other half stays for Raft, gossip and the data files.
func defaultMaxConns() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return 1024
	}
	return int(min(max(rl.Cur/2, 64), 10000))
}

// earlyConfig is what startingServer needs.
type earlyConfig struct {
	// Limited is the listener served (under its connection guard); the
	// real server takes it over.
	Limited *connguard.Listener
	// Status says what the node waits for.
	Status func() string
	// ConnState, when set, is the server's connection hook (tests).
	ConnState func(net.Conn, http.ConnState)
}

// startingServer serves the HTTP listener while the node starts: /healthz
// answers 200, /readyz and everything else 503 with what the node waits
// for. The returned stop ends it and leaves the listener open for the real
// server.
//
// stop only stops the accepting: a connection this server accepted still
// gets its answer (a 503, Connection: close). net/http's Shutdown would
// close one whose request it reads after the shutdown began without an
// answer, and a client that sent a POST on it cannot know whether to retry.
func startingServer(cfg earlyConfig) (stop func()) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = io.WriteString(w, "ok (starting)\n")
			return
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"type": httpapi.ProblemTypeBase + "starting", "title": "Service Unavailable", "status": http.StatusServiceUnavailable,
			"detail": "the node is starting: " + cfg.Status(),
		})
	})
	// Keep-alives off: each connection ends after one answer, so none
	// outlives the start by more than the timeouts below.
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, MaxHeaderBytes: 16 << 10, ConnState: cfg.ConnState}
	srv.SetKeepAlivesEnabled(false)
	el := &earlyListener{Listener: cfg.Limited, stopping: make(chan struct{})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(el)
	}()
	return func() {
		close(el.stopping) // wakes the Accept Serve waits in
		<-served
	}
}

// errStarted ends the starting server's Serve.
var errStarted = errors.New("the node has started")

// earlyListener is the starting server's listener: once stopping is
// closed, Accept ends Serve, and Close leaves the listener under it open
// for the real server.
type earlyListener struct {
	*connguard.Listener
	stopping chan struct{}
}

func (l *earlyListener) Accept() (net.Conn, error) {
	c, err := l.AcceptUntil(l.stopping)
	if errors.Is(err, connguard.ErrStopped) {
		return nil, errStarted
	}
	return c, err
}

func (*earlyListener) Close() error { return nil }
