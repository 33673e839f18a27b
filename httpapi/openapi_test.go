package httpapi_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/linkraft/linkraft/httpapi"
	"github.com/linkraft/linkraft/link"
)

// The OpenAPI document, loaded once for every test of the package.
var spec struct {
	once   sync.Once
	doc    *openapi3.T
	router routers.Router
	err    error
}

func init() {
	// NDJSON bodies are checked as text (each line is checked by the tests
	// that read it).
	openapi3filter.RegisterBodyDecoder("application/x-ndjson", openapi3filter.PlainBodyDecoder)
}

func loadSpec() (*openapi3.T, routers.Router, error) {
	spec.once.Do(func() {
		loader := openapi3.NewLoader()
		spec.doc, spec.err = loader.LoadFromData(httpapi.OpenAPI())
		if spec.err != nil {
			return
		}
		if spec.err = spec.doc.Validate(context.Background()); spec.err != nil {
			return
		}
		// The router matches paths on any host (the test servers' ports).
		routed := *spec.doc
		routed.Servers = nil
		spec.router, spec.err = legacy.NewRouter(&routed)
	})
	return spec.doc, spec.router, spec.err
}

// specTransport checks every /api/v1 exchange of a test against the
// OpenAPI document: every answer must be one the document describes
// (status, content type, body), and every request the API accepted (2xx)
// must be one it documents. A request the API refused is not checked: the
// tests send malformed ones on purpose, and the answer (a problem
// document) is.
type specTransport struct {
	tb   testing.TB
	next http.RoundTripper
}

func (t specTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.HasPrefix(req.URL.Path, "/api/v1/") || req.Method == http.MethodHead || req.Method == http.MethodOptions {
		return t.next.RoundTrip(req)
	}
	var reqBody []byte
	if req.Body != nil {
		var err error
		if reqBody, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return resp, nil
	}
	if err := checkExchange(req, reqBody, resp, body); err != nil {
		t.tb.Errorf("OpenAPI: %s %s → %d: %v", req.Method, req.URL.RequestURI(), resp.StatusCode, err)
	}
	return resp, nil
}

func checkExchange(req *http.Request, reqBody []byte, resp *http.Response, body []byte) error {
	_, router, err := loadSpec()
	if err != nil {
		return fmt.Errorf("the document: %w", err)
	}
	probe := req.Clone(context.Background())
	probe.Body = io.NopCloser(bytes.NewReader(reqBody))
	route, params, err := router.FindRoute(probe)
	if err != nil {
		if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
			return nil // no such route or method: nothing to document
		}
		return fmt.Errorf("not in the document: %w", err)
	}
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}
	in := &openapi3filter.RequestValidationInput{Request: probe, PathParams: params, Route: route, Options: opts}
	if resp.StatusCode/100 == 2 {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			return fmt.Errorf("an accepted request the document does not allow: %w", err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Options: opts}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		return fmt.Errorf("an answer the document does not describe: %w\nbody: %.600s", err, body)
	}
	if resp.StatusCode/100 == 2 {
		exercised.Store(route.Method+" "+route.Path, true)
	}
	return nil
}

// exercised holds "METHOD /path" of every documented operation a test
// has called with success (a checked 2xx).
var exercised sync.Map

// TestMain fails a whole run of the package (no -run) in which some
// documented operation was never called with success: the document may
// not describe what no test shows.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 && flag.Lookup("test.run").Value.String() == "" {
		doc, _, err := loadSpec()
		if err != nil {
			fmt.Fprintln(os.Stderr, "OpenAPI document:", err)
			os.Exit(1)
		}
		var missing []string
		for path, item := range doc.Paths.Map() {
			for method := range item.Operations() {
				if _, ok := exercised.Load(method + " " + path); !ok {
					missing = append(missing, method+" "+path)
				}
			}
		}
		if len(missing) > 0 {
			slices.Sort(missing)
			fmt.Fprintf(os.Stderr, "FAIL: documented operations no test called with success:\n  %s\n", strings.Join(missing, "\n  "))
			code = 1
		}
	}
	os.Exit(code)
}

// TestOpenAPIDocument: the served document is the embedded one, a valid
// OpenAPI 3.1 document, and the methods it leaves out of its paths are not
// served. (A whole route it leaves out is caught by TestMain's check only
// if a test calls it: the transport finds no operation for it.)
func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	doc, _, err := loadSpec()
	if err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	tn := startFake(t, link.URLPolicy{}, nil)
	r := tn.do(t, "GET", "/api/v1/openapi.json", "", nil, "Authorization", "")
	if r.status != 200 || !bytes.Equal(r.body, httpapi.OpenAPI()) {
		t.Fatalf("GET /api/v1/openapi.json: %d", r.status)
	}
	// Every operation has an operationId, unique and lowerCamelCase, so
	// that generated clients have real names (issue 27).
	seen := map[string]string{}
	for path, item := range doc.Paths.Map() {
		for m, op := range item.Operations() {
			id := op.OperationID
			if id == "" || id[0] < 'a' || id[0] > 'z' || strings.ContainsAny(id, "-_ /{}") {
				t.Errorf("%s %s: operationId %q", m, path, id)
			}
			if other, dup := seen[id]; dup {
				t.Errorf("%s %s: operationId %q is also %s's", m, path, id, other)
			}
			seen[id] = m + " " + path
		}
	}
	// No route the document leaves out is served: each documented path's
	// other methods answer 405, with the documented ones in Allow (a
	// fixed path such as /api/v1/links/bulk-delete too, though
	// /api/v1/links/{code} would match it).
	for path, item := range doc.Paths.Map() {
		concrete := strings.NewReplacer("{code}", "abc123", "{id}", "k1", "{domain}", "example.org").Replace(path)
		var want []string
		for _, m := range []string{"GET", "POST", "PATCH", "DELETE", "PUT"} {
			if item.GetOperation(m) != nil {
				want = append(want, m)
			}
		}
		for _, m := range []string{"GET", "POST", "PATCH", "DELETE", "PUT"} {
			if item.GetOperation(m) != nil {
				continue
			}
			r := tn.do(t, m, concrete, "application/json", []byte("{}"))
			if r.status != http.StatusMethodNotAllowed {
				t.Errorf("%s %s, not documented: %d, want 405", m, path, r.status)
				continue
			}
			var allowed []string
			for _, a := range strings.Split(r.header.Get("Allow"), ", ") {
				if a != "HEAD" {
					allowed = append(allowed, a)
				}
			}
			if !slices.Equal(allowed, want) {
				t.Errorf("%s %s: Allow %q, documented %v", m, path, r.header.Get("Allow"), want)
			}
		}
	}
}
