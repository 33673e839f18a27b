package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/httpapi"
	"github.com/linkraft/linkraft/httpapi/fastpath"
	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/internal/testcluster"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/metrics"
)

// testNode is the real HTTP handler, served as linknode serves it, in front
// of a real single-node cluster (Raft, bbolt, peer port on loopback) or, for
// tests of the HTTP layer alone, of a fakeService.
type testNode struct {
	roles   roles
	node    *cluster.Node // nil in front of the fakes
	srv     *httptest.Server
	admin   *httptest.Server // the admin listener
	key     string           // the first admin key's secret
	fast    *fastpath.Listener
	api     *httpapi.Server
	client  *http.Client
	metrics *metrics.Metrics
}

// startNode starts a node; opts adjust its cluster configuration.
func startNode(tb testing.TB, policy link.URLPolicy, opts ...func(*cluster.Config)) *testNode {
	return startNodeAPI(tb, policy, nil, opts...)
}

// startNodeAPI is startNode with the HTTP configuration adjusted by api.
func startNodeAPI(tb testing.TB, policy link.URLPolicy, apiOpt func(*httpapi.Config), opts ...func(*cluster.Config)) *testNode {
	tb.Helper()
	m := metrics.New()
	secret, err := apikey.NewSecret()
	if err != nil {
		tb.Fatal(err)
	}
	cfg := cluster.Config{Shards: 4, Observer: m, IDBlockSize: 64, AdminKey: secret}
	for _, o := range opts {
		o(&cfg)
	}
	n := testcluster.Node(tb, cfg)
	tn := serve(tb, roles{n.Links(), n.Keys(), n.Admin(), n.Analytics()}, secret, m, policy, apiOpt)
	tn.node = n
	tn.waitReady(tb)
	return tn
}

// startFake serves the HTTP handler in front of the fake roles: no Raft,
// no disk. apiOpt adjusts the HTTP configuration.
func startFake(tb testing.TB, policy link.URLPolicy, apiOpt func(*httpapi.Config)) *testNode {
	tb.Helper()
	secret, err := apikey.NewSecret()
	if err != nil {
		tb.Fatal(err)
	}
	return serve(tb, newFakeRoles(secret), secret, metrics.New(), policy, apiOpt)
}

// serve starts the public listener (fast path in front of net/http) and
// the admin listener of an httpapi.Server over rs.
func serve(tb testing.TB, rs roles, secret string, m *metrics.Metrics, policy link.URLPolicy, apiOpt func(*httpapi.Config)) *testNode {
	tb.Helper()
	hcfg := httpapi.Config{
		Links: rs.links, Keys: rs.keys, Admin: rs.admin, Analytics: rs.analytics,
		PublicURL: "http://sho.rt", URLPolicy: policy, Metrics: m.Handler(), Recorder: m,
		KeyRate: httpapi.Rate{PerSecond: -1}, // limits have their own tests
	}
	if a, ok := rs.analytics.(*cluster.Analytics); ok && a.Recorder() != nil {
		hcfg.Clicks = a.Recorder() // a node with analytics on, wired as linknode wires it
	}
	if apiOpt != nil {
		apiOpt(&hcfg)
	}
	api, err := httpapi.New(hcfg)
	if err != nil {
		tb.Fatal(err)
	}
	admin := httptest.NewServer(api.Admin())
	tb.Cleanup(admin.Close)
	// Served as linknode serves it: the redirect fast path in front of
	// net/http, so every test here goes through both.
	srv := httptest.NewUnstartedServer(api)
	fast := api.FastListener(srv.Listener, fastpath.Options{})
	srv.Listener = fast
	srv.Start()
	tb.Cleanup(srv.Close)
	client := &http.Client{
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		// Every /api/v1 exchange is checked against the OpenAPI document.
		Transport: specTransport{tb: tb, next: &http.Transport{MaxConnsPerHost: 128, MaxIdleConnsPerHost: 128}},
	}
	return &testNode{roles: rs, srv: srv, admin: admin, key: secret, fast: fast, client: client, metrics: m, api: api}
}

// waitKey waits until the node knows secret (the first admin key is made
// by the meta leader's loop after the settings).
func (tn *testNode) waitKey(tb testing.TB, secret string) {
	tb.Helper()
	testkit.WaitFor(tb, 20*time.Second, "the node to know the key", func() bool {
		_, err := tn.roles.keys.Authenticate(secret)
		return err == nil
	})
}

func (tn *testNode) waitReady(tb testing.TB) {
	tb.Helper()
	testkit.WaitFor(tb, 20*time.Second, "/readyz 200", func() bool { return tn.do(tb, "GET", "/readyz", "", nil).status == 200 })
	tn.waitKey(tb, tn.key)
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(tb testing.TB) map[string]any {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		tb.Fatalf("body %q is not a JSON object: %v", r.body, err)
	}
	return m
}

// do sends a request to the public listener with the admin key; body is
// sent as-is with the given content type. hdr are name, value pairs; an
// empty Authorization sends none.
func (tn *testNode) do(tb testing.TB, method, path, contentType string, body []byte, hdr ...string) response {
	tb.Helper()
	return tn.send(tb, tn.srv.URL, method, path, contentType, body, hdr...)
}

// adminDo is do on the admin listener.
func (tn *testNode) adminDo(tb testing.TB, method, path, contentType string, body []byte, hdr ...string) response {
	tb.Helper()
	return tn.send(tb, tn.admin.URL, method, path, contentType, body, hdr...)
}

func (tn *testNode) send(tb testing.TB, base, method, path, contentType string, body []byte, hdr ...string) response {
	tb.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		tb.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Authorization", "Bearer "+tn.key)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := tn.client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func (tn *testNode) postJSON(tb testing.TB, path, body string) response {
	tb.Helper()
	return tn.do(tb, "POST", path, "application/json", []byte(body))
}

func (tn *testNode) create(tb testing.TB, body string) map[string]any {
	tb.Helper()
	r := tn.postJSON(tb, "/api/v1/links", body)
	if r.status != http.StatusCreated {
		tb.Fatalf("create %s: %d %s", body, r.status, r.body)
	}
	return r.json(tb)
}

// storedState is every stored link (tombstones included) of the node, as
// read straight from each shard's bbolt file (or the fake's map).
func (tn *testNode) storedState(tb testing.TB) string {
	tb.Helper()
	var sb strings.Builder
	err := tn.roles.admin.ForEachLink(func(l *link.Link) bool {
		b, _ := json.Marshal(l)
		sb.Write(b)
		sb.WriteByte('\n')
		return true
	})
	if err != nil {
		tb.Fatal(err)
	}
	return sb.String()
}
