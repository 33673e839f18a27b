package httpapi_test

import (
	"strings"
	"testing"

	"github.com/linkraft/linkraft/link"
)

// TestBackupAndRestoreRoutes: GET /admin/v1/backup streams the cluster
// to an admin key only, on the admin listener only; POST
// /admin/v1/restore refuses what is not a whole backup (422, nothing
// written), then puts it into another node: links an export could not
// carry (password, disabled, deleted) come back as they were, and the
// first node's key opens the second. A cluster with links refuses it
// (409) unless resumed.
func TestBackupAndRestoreRoutes(t *testing.T) {
	t.Parallel()
	a := startNode(t, link.URLPolicy{})
	a.create(t, `{"url":"https://example.com/open","alias":"open"}`)
	a.create(t, `{"url":"https://example.com/vault","alias":"locked","password":"correct horse"}`)
	a.create(t, `{"url":"https://example.com/off","alias":"off"}`)
	if r := a.do(t, "PATCH", "/api/v1/links/off", "application/json", []byte(`{"disabled":true}`)); r.status != 200 {
		t.Fatalf("disable: %d %s", r.status, r.body)
	}
	a.create(t, `{"url":"https://example.com/gone","alias":"gone"}`)
	if r := a.do(t, "DELETE", "/api/v1/links/gone", "", nil); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}

	if r := a.do(t, "GET", "/admin/v1/backup", "", nil); r.status != 404 {
		t.Fatalf("backup on the public listener: %d", r.status)
	}
	if r := a.adminDo(t, "GET", "/admin/v1/backup", "", nil, "Authorization", ""); r.status != 401 {
		t.Fatalf("backup without a key: %d", r.status)
	}
	if r := a.adminDo(t, "POST", "/admin/v1/backup", "", nil); r.status != 405 {
		t.Fatalf("POST backup: %d", r.status)
	}
	r := a.adminDo(t, "GET", "/admin/v1/backup", "", nil)
	if r.status != 200 || r.header.Get("Content-Type") != "application/octet-stream" || !strings.HasPrefix(r.header.Get("Content-Disposition"), `attachment; filename="linkraft-`) {
		t.Fatalf("backup: %d %v", r.status, r.header)
	}
	file := r.body

	b := startNode(t, link.URLPolicy{})
	for _, bad := range [][]byte{file[:len(file)-9], []byte("code,url\nx,https://e.example\n"), {}} {
		r := b.adminDo(t, "POST", "/admin/v1/restore", "application/octet-stream", bad)
		if r.status != 422 || r.json(t)["type"] != "/problems/bad-backup" || !strings.Contains(r.json(t)["detail"].(string), "nothing was restored") {
			t.Fatalf("restore of %d bad bytes: %d %s", len(bad), r.status, r.body)
		}
	}
	if r := b.do(t, "GET", "/api/v1/links/open", "", nil); r.status != 404 {
		t.Fatalf("a refused restore wrote: %d %s", r.status, r.body)
	}
	if r := b.adminDo(t, "POST", "/admin/v1/restore?resume=perhaps", "application/octet-stream", file); r.status != 400 {
		t.Fatalf("resume=perhaps: %d %s", r.status, r.body)
	}
	r = b.adminDo(t, "POST", "/admin/v1/restore", "application/octet-stream", file)
	if r.status != 200 || r.json(t)["links"] != float64(4) || r.json(t)["conflicts"] != float64(0) {
		t.Fatalf("restore: %d %s", r.status, r.body)
	}
	if r := b.do(t, "GET", "/open", "", nil, "Authorization", ""); r.status != 302 || r.header.Get("Location") != "https://example.com/open" {
		t.Fatalf("restored open link: %d %v", r.status, r.header)
	}
	if r := b.do(t, "GET", "/locked", "", nil, "Authorization", "", "Accept", "text/html"); r.status != 200 || !strings.Contains(string(r.body), `<form method="post">`) {
		t.Fatalf("restored password link: %d %s", r.status, r.body)
	}
	for _, code := range []string{"off", "gone"} {
		if r := b.do(t, "GET", "/"+code, "", nil, "Authorization", ""); r.status != 410 {
			t.Fatalf("restored %s: %d", code, r.status)
		}
	}
	if r := b.do(t, "POST", "/api/v1/links", "application/json", []byte(`{"url":"https://example.com/x","alias":"gone"}`)); r.status != 409 {
		t.Fatalf("the deleted code as an alias: %d %s", r.status, r.body)
	}
	if r := b.do(t, "GET", "/api/v1/links/open", "", nil, "Authorization", "Bearer "+a.key); r.status != 200 {
		t.Fatalf("the first node's key on the second: %d %s", r.status, r.body)
	}
	if r := b.adminDo(t, "POST", "/admin/v1/restore", "application/octet-stream", file); r.status != 409 || r.json(t)["type"] != "/problems/cluster-not-empty" {
		t.Fatalf("a second restore: %d %s", r.status, r.body)
	}
	if r := b.adminDo(t, "POST", "/admin/v1/restore?resume=true", "application/octet-stream", file); r.status != 200 || r.json(t)["present"] != float64(4) || r.json(t)["links"] != float64(0) {
		t.Fatalf("resumed: %d %s", r.status, r.body)
	}
}
