package jepsen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"

	"github.com/linkraft/linkraft/jepsen/checker"
	"github.com/linkraft/linkraft/jepsen/history"
)

// client speaks linknode's HTTP API and classifies every answer the
// Jepsen way: ok (it happened), fail (it certainly did not), info (nobody
// knows).
type client struct {
	http    *http.Client
	timeout time.Duration
	// key is the admin API key every request sends.
	key string
}

func newClient(timeout time.Duration, conns int, key string) *client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: timeout}).DialContext,
		MaxIdleConns:        conns * 4,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     30 * time.Second,
	}
	return &client{
		timeout: timeout,
		key:     key,
		http: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
	}
}

// result is an operation's outcome: the type and the fields to record.
type result struct {
	typ history.Type
	op  history.Op // Key, Value, Status, Error
}

func (c *client) do(ctx context.Context, method, u string, body any) (*http.Response, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20)) // lease histories grow with a run
	if err != nil {
		return resp, nil, err
	}
	return resp, b, nil
}

// indeterminate is the outcome of a request whose effect is unknown —
// except a refused connection: that request never reached a server, so it
// certainly did nothing (a definite failure).
func indeterminate(status int, err error, body []byte) result {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return result{typ: history.Fail, op: history.Op{Error: err.Error()}}
	}
	r := result{typ: history.Info, op: history.Op{Status: status}}
	if err != nil {
		r.op.Error = err.Error()
	} else {
		r.op.Error = problemDetail(body)
	}
	return r
}

func problemDetail(body []byte) string {
	var p struct{ Type, Detail string }
	if json.Unmarshal(body, &p) == nil && (p.Type != "" || p.Detail != "") {
		return p.Type + ": " + p.Detail
	}
	if len(body) > 200 {
		body = body[:200]
	}
	return string(body)
}

type linkJSON struct {
	Code string `json:"code"`
	URL  string `json:"url"`
}

// create posts a link (with alias, if set). 201 is ok; 409 is a definite
// refusal (the code is taken); other 4xx are definite failures; anything
// else is indeterminate.
func (c *client) create(ctx context.Context, base, target, alias string) result {
	body := map[string]any{"url": target}
	if alias != "" {
		body["alias"] = alias
	}
	resp, b, err := c.do(ctx, http.MethodPost, base+"/api/v1/links", body)
	if err != nil {
		return indeterminate(0, err, nil)
	}
	switch {
	case resp.StatusCode == http.StatusCreated:
		var l linkJSON
		if err := json.Unmarshal(b, &l); err != nil || l.Code == "" {
			return indeterminate(resp.StatusCode, fmt.Errorf("undecodable 201: %q", b), nil)
		}
		return result{typ: history.OK, op: history.Op{Key: l.Code, Value: target, Status: resp.StatusCode}}
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return result{typ: history.Fail, op: history.Op{Status: resp.StatusCode, Error: problemDetail(b)}}
	}
	return indeterminate(resp.StatusCode, nil, b)
}

// createBulk posts targets as one POST /api/v1/links/bulk. The request as a
// whole is judged as create judges one: a 4xx refusal fails every link, an
// unknown outcome leaves every link indeterminate. A 200 answers each link
// on its own: 201 ok, 4xx fail, anything else (a 503 for its shard)
// indeterminate.
func (c *client) createBulk(ctx context.Context, base string, targets []string) []result {
	links := make([]map[string]string, len(targets))
	for i, t := range targets {
		links[i] = map[string]string{"url": t}
	}
	all := func(r result) []result {
		out := make([]result, len(targets))
		for i := range out {
			out[i] = r
		}
		return out
	}
	resp, b, err := c.do(ctx, http.MethodPost, base+"/api/v1/links/bulk", map[string]any{"links": links})
	if err != nil {
		return all(indeterminate(0, err, nil))
	}
	switch {
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return all(result{typ: history.Fail, op: history.Op{Status: resp.StatusCode, Error: problemDetail(b)}})
	case resp.StatusCode != http.StatusOK:
		return all(indeterminate(resp.StatusCode, nil, b))
	}
	var body struct {
		Results []struct {
			Status  int       `json:"status"`
			Link    *linkJSON `json:"link"`
			Problem *struct{ Type, Detail string }
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &body); err != nil || len(body.Results) != len(targets) {
		return all(indeterminate(resp.StatusCode, fmt.Errorf("undecodable bulk answer: %.200q", b), nil))
	}
	out := make([]result, len(targets))
	for i, it := range body.Results {
		var detail string
		if it.Problem != nil {
			detail = it.Problem.Type + ": " + it.Problem.Detail
		}
		switch {
		case it.Status == http.StatusCreated && it.Link != nil && it.Link.Code != "" && it.Link.URL == targets[i]:
			out[i] = result{typ: history.OK, op: history.Op{Key: it.Link.Code, Value: targets[i], Status: it.Status}}
		case it.Status == http.StatusCreated:
			out[i] = result{typ: history.Info, op: history.Op{Status: it.Status, Error: fmt.Sprintf("bulk result %d does not match its request", i)}}
		case it.Status >= 400 && it.Status < 500:
			out[i] = result{typ: history.Fail, op: history.Op{Status: it.Status, Error: detail}}
		default:
			out[i] = result{typ: history.Info, op: history.Op{Status: it.Status, Error: detail}}
		}
	}
	return out
}

// update sets the URL of a link: 200 ok, 404 or 410 (deleted) definite refusal.
func (c *client) update(ctx context.Context, base, code, target string) result {
	resp, b, err := c.do(ctx, http.MethodPatch, base+"/api/v1/links/"+url.PathEscape(code), map[string]any{"url": target})
	if err != nil {
		return indeterminate(0, err, nil)
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		return result{typ: history.OK, op: history.Op{Value: target, Status: resp.StatusCode}}
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return result{typ: history.Fail, op: history.Op{Value: target, Status: resp.StatusCode, Error: problemDetail(b)}}
	}
	return indeterminate(resp.StatusCode, nil, b)
}

// remove deletes a link: 204 ok, 404 or 410 (deleted) definite refusal.
func (c *client) remove(ctx context.Context, base, code string) result {
	resp, b, err := c.do(ctx, http.MethodDelete, base+"/api/v1/links/"+url.PathEscape(code), nil)
	if err != nil {
		return indeterminate(0, err, nil)
	}
	switch {
	case resp.StatusCode == http.StatusNoContent:
		return result{typ: history.OK, op: history.Op{Status: resp.StatusCode}}
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return result{typ: history.Fail, op: history.Op{Status: resp.StatusCode, Error: problemDetail(b)}}
	}
	return indeterminate(resp.StatusCode, nil, b)
}

// read is a linearizable read (?consistent=true): 200 with the URL, or
// 404/410 (no live link: unknown or deleted), are ok; anything else is
// indeterminate (and dropped by the checker).
func (c *client) read(ctx context.Context, base, code string) result {
	resp, b, err := c.do(ctx, http.MethodGet, base+"/api/v1/links/"+url.PathEscape(code)+"?consistent=true", nil)
	if err != nil {
		return indeterminate(0, err, nil)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		var l linkJSON
		if err := json.Unmarshal(b, &l); err != nil {
			return indeterminate(resp.StatusCode, fmt.Errorf("undecodable 200: %q", b), nil)
		}
		return result{typ: history.OK, op: history.Op{Value: l.URL, Status: resp.StatusCode}}
	case http.StatusNotFound, http.StatusGone:
		return result{typ: history.OK, op: history.Op{Status: resp.StatusCode}}
	}
	return indeterminate(resp.StatusCode, nil, b)
}

// resolve is the redirect path, GET /{code}: a redirect (Location) or a
// 404/410 are ok answers; anything else is indeterminate.
func (c *client) resolve(ctx context.Context, base, code string) result {
	resp, b, err := c.do(ctx, http.MethodGet, base+"/"+url.PathEscape(code), nil)
	if err != nil {
		return indeterminate(0, err, nil)
	}
	switch s := resp.StatusCode; {
	case s == 301 || s == 302 || s == 307 || s == 308:
		return result{typ: history.OK, op: history.Op{Value: resp.Header.Get("Location"), Status: s}}
	case s == http.StatusNotFound || s == http.StatusGone:
		return result{typ: history.OK, op: history.Op{Status: s}}
	}
	return indeterminate(resp.StatusCode, nil, b)
}

// groupStatus is one group in GET /admin/v1/cluster.
type groupStatus struct {
	ID       string   `json:"id"`
	Leader   string   `json:"leader"`
	State    string   `json:"state"`
	Term     uint64   `json:"term"`
	Replicas []string `json:"replicas"`
}

// clusterStatus is the part of GET /admin/v1/cluster the harness uses.
type clusterStatus struct {
	NodeID  string        `json:"node_id"`
	Meta    groupStatus   `json:"meta"`
	Shards  []groupStatus `json:"shards"`
	Storage struct {
		Alarm  bool   `json:"alarm"`
		Reason string `json:"reason"`
	} `json:"storage"`
}

func (c *client) status(ctx context.Context, base string) (*clusterStatus, error) {
	resp, b, err := c.do(ctx, http.MethodGet, base+"/admin/v1/cluster", nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("cluster status: %d", resp.StatusCode)
	}
	var s clusterStatus
	return &s, json.Unmarshal(b, &s)
}

func (c *client) leases(ctx context.Context, base string) ([]checker.Lease, error) {
	resp, b, err := c.do(ctx, http.MethodGet, base+"/admin/v1/leases", nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("leases: %d", resp.StatusCode)
	}
	var out struct {
		Leases []checker.Lease `json:"leases"`
	}
	return out.Leases, json.Unmarshal(b, &out)
}

// digests is a node's GET /admin/v1/digest.
func (c *client) digests(ctx context.Context, base string) ([]checker.GroupDigest, error) {
	resp, b, err := c.do(ctx, http.MethodGet, base+"/admin/v1/digest", nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("digest: %d %s", resp.StatusCode, problemDetail(b))
	}
	var out struct {
		Groups []checker.GroupDigest `json:"groups"`
	}
	return out.Groups, json.Unmarshal(b, &out)
}

// links streams a node's GET /admin/v1/links (no per-request timeout: it
// may be long; ctx bounds it).
func (c *client) links(ctx context.Context, base string) ([]checker.Listed, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/admin/v1/links", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("links: %d", resp.StatusCode)
	}
	var out []checker.Listed
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l struct {
			checker.Listed
			Error string `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, err
		}
		if l.Error != "" {
			return nil, errors.New("links: " + l.Error)
		}
		out = append(out, l.Listed)
	}
	return out, sc.Err()
}

// apiLinks pages through a node's GET /api/v1/links (every owner's, with
// the admin key), oldest first: the listing the API gives users.
func (c *client) apiLinks(ctx context.Context, base string) ([]checker.Listed, error) {
	var out []checker.Listed
	cursor := ""
	for page := 0; ; page++ {
		u := base + "/api/v1/links?limit=1000&sort=created"
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		resp, b, err := c.do(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("api listing: %d %s", resp.StatusCode, b)
		}
		var body struct {
			Links      []checker.Listed `json:"links"`
			NextCursor *string          `json:"next_cursor"`
		}
		if err := json.Unmarshal(b, &body); err != nil {
			return nil, err
		}
		out = append(out, body.Links...)
		if body.NextCursor == nil {
			return out, nil
		}
		if page > 10000 {
			return nil, errors.New("api listing: no end")
		}
		cursor = *body.NextCursor
	}
}
