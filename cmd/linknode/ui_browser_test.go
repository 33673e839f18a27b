package main

import (
	"bytes"
	"context"
	"fmt"
	"image"
	_ "image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/makiuchi-d/gozxing"
	"github.com/makiuchi-d/gozxing/qrcode"

	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/internal/testkit"
)

// The web UI in a real browser: headless Chromium (Debian's package,
// installed by .ci/run) driven by chromedp against linknode processes.
// Without a Chromium binary the tests skip, unless LINKRAFT_REQUIRE_BROWSER
// is set (CI sets it: there, no browser is a failure). Screenshots of each
// page go to LINKRAFT_ARTIFACTS (default: a folder in the temp dir).

// chromiumPath finds the browser, or skips (fails under
// LINKRAFT_REQUIRE_BROWSER).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("LINKRAFT_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("LINKRAFT_REQUIRE_BROWSER") != "" {
		t.Fatal("no Chromium binary (LINKRAFT_REQUIRE_BROWSER is set): apt-get install chromium")
	}
	t.Skip("no Chromium binary: apt-get install chromium to run the browser tests")
	return ""
}

// userAgent is a desktop Chrome's, so that the browser's visits count as
// a human's (HeadlessChrome is a bot to the analytics).
const userAgent = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36"

// tab is one headless browser tab, with what its pages reported.
type tab struct {
	t        *testing.T
	ctx      context.Context
	shots    string
	mu       sync.Mutex
	problems []string
	dl       chan string
}

// newTab starts Chromium as the workplace's notes say it must run here:
// headless, no sandbox (root), no GPU, no background networking, a fresh
// profile.
func newTab(t *testing.T, flags ...chromedp.ExecAllocatorOption) *tab {
	t.Helper()
	bin := chromiumPath(t)
	// The profile is removed by hand: Chromium's helpers may still write
	// to it for a moment after the browser is gone (t.TempDir would fail
	// the test on that).
	profile, err := os.MkdirTemp("", "linkraft-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(append(chromedp.DefaultExecAllocatorOptions[:], flags...),
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(profile), chromedp.WindowSize(1280, 900), chromedp.UserAgent(userAgent))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(func() {
		cancelT()
		cancelC()
		cancelA()
		for range 50 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond) // a best effort; nothing waits on it
		}
	})
	shots := os.Getenv("LINKRAFT_ARTIFACTS")
	if shots == "" {
		shots = filepath.Join(os.TempDir(), "linkraft-artifacts")
	}
	shots = filepath.Join(shots, "ui-screenshots")
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	tb := &tab{t: t, ctx: ctx, shots: shots, dl: make(chan string, 4)}
	dlDir := t.TempDir()
	chromedp.ListenTarget(ctx, func(ev any) {
		switch e := ev.(type) {
		case *page.EventJavascriptDialogOpening:
			go func() { _ = chromedp.Run(ctx, page.HandleJavaScriptDialog(true)) }()
		case *runtime.EventExceptionThrown:
			tb.report("exception: " + e.ExceptionDetails.Error())
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.LevelError {
				tb.report(string(e.Entry.Source) + ": " + e.Entry.Text + " " + e.Entry.URL)
			}
		case *browser.EventDownloadProgress:
			if e.State == browser.DownloadProgressStateCompleted {
				tb.dl <- filepath.Join(dlDir, e.GUID)
			}
		}
	})
	// The first run starts the browser, which lives as long as the
	// context of that run: the tab's own, not a step's timeout.
	if err := chromedp.Run(ctx, cdplog.Enable(), browser.SetDownloadBehavior(browser.SetDownloadBehaviorBehaviorAllowAndName).
		WithDownloadPath(dlDir).WithEventsEnabled(true)); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	t.Logf("screenshots in %s", shots)
	return tb
}

func (b *tab) report(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, s)
}

// run runs actions within 30 s, failing the test on an error (with a
// screenshot and the page's HTML for the story).
func (b *tab) run(actions ...chromedp.Action) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		var png []byte
		var html, loc string
		_ = chromedp.Run(b.ctx, chromedp.FullScreenshot(&png, 100), chromedp.OuterHTML("html", &html, chromedp.ByQuery), chromedp.Location(&loc))
		_ = os.WriteFile(filepath.Join(b.shots, "failure-"+b.t.Name()+".png"), png, 0o644)
		b.t.Fatalf("browser: %v\nat %s:\n%s", err, loc, html)
	}
}

// text is the text of the first element sel matches.
func (b *tab) text(sel string) string {
	b.t.Helper()
	var s string
	b.run(textOf(sel, &s))
	return s
}

// location is the page's address.
func (b *tab) location() string {
	b.t.Helper()
	var s string
	b.run(chromedp.Location(&s))
	return s
}

// a11yCheck lists what a screen-reader or keyboard user would trip on:
// a control with no label, an image with no text, an id used twice, a
// page with no language or no h1, a positive tabindex (a focus order
// other than the page's).
const a11yCheck = `(() => {
  const out = [];
  for (const e of document.querySelectorAll("input:not([type=hidden]),select,textarea,button")) {
    const name = e.labels && e.labels.length ? e.labels[0].textContent : (e.getAttribute("aria-label") || e.textContent || e.value || "");
    if (!name.trim()) out.push("no label: " + e.outerHTML.slice(0, 80));
  }
  for (const e of document.querySelectorAll("img")) if (!e.alt) out.push("no alt: " + e.outerHTML.slice(0, 80));
  const ids = {};
  for (const e of document.querySelectorAll("[id]")) { if (ids[e.id]) out.push("id twice: " + e.id); ids[e.id] = 1; }
  if (!document.documentElement.lang) out.push("no lang");
  if (!document.querySelector("h1")) out.push("no h1");
  for (const e of document.querySelectorAll("[tabindex]")) if (e.tabIndex > 0) out.push("tabindex > 0: " + e.outerHTML.slice(0, 80));
  return out;
})()`

// shot checks the page for a11yCheck's faults and saves a screenshot of
// the whole page as name.png.
func (b *tab) shot(name string) {
	b.t.Helper()
	var faults []string
	b.run(chromedp.Evaluate(a11yCheck, &faults))
	for _, f := range faults {
		b.t.Errorf("page %s: %s", name, f)
	}
	var png []byte
	b.run(chromedp.FullScreenshot(&png, 100))
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// expect drops the browser's reports of answers with these statuses (a
// step that is meant to be refused), then fails on anything else it
// reported (clean).
func (b *tab) expect(statuses ...string) {
	b.t.Helper()
	b.mu.Lock()
	kept := b.problems[:0]
	for _, p := range b.problems {
		drop := false
		for _, st := range statuses {
			drop = drop || strings.Contains(p, "status of "+st)
		}
		if !drop {
			kept = append(kept, p)
		}
	}
	b.problems = kept
	b.mu.Unlock()
	b.clean()
}

// clean fails the test if a page threw, or the browser refused anything
// (a Content Security Policy violation is logged as an error).
func (b *tab) clean() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		b.t.Errorf("the browser reported: %s", p)
	}
	b.problems = nil
}

// TestBrowserNewcomer walks the path in Chromium on a node started
// as a newcomer starts one (no key given: it writes admin.key): sign in
// with a wrong key, then admin.key; shorten; find the link; follow it; edit
// it; visit it and see the clicks in the chart; download the QR code and
// decode it; delete it and see the 410 page; refuse a cross-origin post;
// sign out.
//
// The browser tests do not run in parallel: they run one at a time, before
// the package's parallel tests start, so that Chromium's CPU does not land
// on top of the multi-process cluster tests (here and in other packages).
func TestBrowserNewcomer(t *testing.T) {
	// The destination is a local server, which a link may not name (no
	// loopback destinations): the browser maps a public-looking name to it.
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<!doctype html><title>Destination reached</title><p>You made it.</p>")
	}))
	defer dest.Close()
	b := newTab(t, chromedp.Flag("host-resolver-rules", "MAP destination.example "+strings.TrimPrefix(dest.URL, "http://")))
	dir := t.TempDir()
	p := launchProcEnv(t, nil, dir, newAddrs(t), "-click-flush", "100ms")
	var key string
	testkit.Eventually(t, 60*time.Second, func() (err error) {
		key, err = apikey.LoadSecret(filepath.Join(dir, "admin.key"))
		return err
	})
	testkit.Eventually(t, 60*time.Second, func() error {
		resp, err := http.Get(p.base + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("readyz %d", resp.StatusCode)
		}
		return nil
	})

	// / sends the browser to the sign-in page.
	b.run(chromedp.Navigate(p.base+"/"), waitVisible("#key"))
	if loc := b.location(); !strings.HasPrefix(loc, p.base+"/ui/login") {
		t.Fatalf("/ went to %s", loc)
	}
	b.shot("01-sign-in")
	// A wrong key.
	b.run(typeIn("#key", "lr_not-a-key"), submit("#key"),
		waitVisible("#login-error"))
	if s := b.text("#login-error"); !strings.Contains(s, "unknown or revoked") {
		t.Fatalf("wrong key says %q", s)
	}
	b.expect("401")
	// admin.key.
	b.run(typeIn("#key", key), submit("#key"),
		waitVisible("#shorten"))
	b.shot("02-shorten")
	// The key is in no storage, URL or cookie a script can read, nor in
	// the node's log; the session cookie is out of scripts' reach.
	var seen string
	b.run(chromedp.Evaluate(`JSON.stringify(localStorage) + JSON.stringify(sessionStorage) + document.cookie + location.href + history.length`, &seen))
	if strings.Contains(seen, key) || strings.Contains(seen, "linkraft_session") {
		t.Fatalf("the page's script can read the key or the session: %s", seen)
	}
	if strings.Contains(p.logs(), key) {
		t.Fatal("the key is in the node's log")
	}
	// The keyboard's first stop is the skip link, and it leads to the page.
	var focused string
	b.run(chromedp.KeyEvent(kb.Tab), chromedp.Evaluate(`document.activeElement.className`, &focused))
	if focused != "skip" {
		t.Fatalf("the first Tab stops at %q, not the skip link", focused)
	}
	b.run(chromedp.KeyEvent(kb.Enter), chromedp.Evaluate(`document.activeElement.id`, &focused))
	if focused != "main" {
		t.Fatalf("the skip link leads to %q, not main", focused)
	}

	// Shorten a link to the local destination.
	target := "http://destination.example/page"
	b.run(typeIn("#f-url", target), click("#shorten button[type=submit]"),
		waitVisible("#short"))
	var short string
	b.run(valueOf("#short", &short))
	code := short[strings.LastIndexByte(short, '/')+1:]
	port := p.base[strings.LastIndexByte(p.base, ':'):]
	if !strings.HasPrefix(short, "http://localhost"+port+"/") || code == "" || !strings.Contains(b.text("main"), "Link created.") {
		t.Fatalf("after shorten: short URL %q", short)
	}
	b.shot("03-link")

	// Find it in the list.
	b.run(click(`nav a[href="/ui/links"]`), waitVisible("#q"),
		typeIn("#q", code), submit("#q"),
		poll("the search's address", `location.search.includes("q=`+code+`")`), waitVisible(`#bulk a[href="/ui/links/`+code+`"]`))
	b.shot("04-links")
	// The same page in dark mode, as a system that prefers it asks.
	b.run(emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}),
		chromedp.Reload(), waitVisible("#q"))
	var bg string
	b.run(chromedp.Evaluate(`getComputedStyle(document.documentElement).backgroundColor`, &bg))
	var field string
	b.run(chromedp.Evaluate(`getComputedStyle(document.querySelector("#q")).backgroundColor + " " + getComputedStyle(document.querySelector("#q")).color`, &field))
	t.Logf("dark mode: page %s, search field %s", bg, field)
	if bg == "rgb(255, 255, 255)" || strings.HasPrefix(field, "rgb(251") {
		t.Errorf("dark mode kept a light page or field: page %s, search field %s", bg, field)
	}
	b.shot("04-links-dark")
	b.run(emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "light"}}))

	// Follow the short link in the browser.
	var title string
	b.run(chromedp.Navigate(short), waitVisible("p"), chromedp.Title(&title))
	if title != "Destination reached" || b.location() != target {
		t.Fatalf("the short link led to %q (%s)", b.location(), title)
	}

	// Edit its title.
	b.run(chromedp.Navigate(p.base+"/ui/links/"+code), waitVisible("#short"),
		click("details summary"), waitVisible("#f-title"),
		typeIn("#f-title", "Edited in a browser"),
		click("#edit button[type=submit]"), waitVisible(".flash"))
	if !strings.Contains(b.text(".flash"), "Saved.") || !strings.Contains(b.text("hgroup"), "Edited in a browser") {
		t.Fatalf("after edit: %q / %q", b.text(".flash"), b.text("hgroup"))
	}

	// Visits, then the numbers: the total counts them and the chart's
	// series holds them.
	// (A redirect may be cached by the browser for 90 s: each visit asks
	// for another address, as visitors from other pages would.)
	const visits = 4
	for i := range visits - 1 {
		b.run(chromedp.Navigate(short+"?from=visit"+strconv.Itoa(i)), waitVisible("p"))
	}
	testkit.Eventually(t, 30*time.Second, func() error {
		b.run(chromedp.Navigate(p.base+"/ui/links/"+code+"/stats?range=24h"), waitVisible("#chart canvas"))
		if n, _ := strconv.Atoi(b.text("#humans")); n < visits {
			return fmt.Errorf("the page shows %d human clicks", n)
		}
		return nil
	})
	var series string
	b.run(attrOf("#chart", "data-series", &series))
	if sum := sumHumans(t, series); sum < visits {
		t.Fatalf("the chart's series holds %d human clicks: %s", sum, series)
	}
	b.shot("05-stats")
	b.run(chromedp.EmulateViewport(390, 844), chromedp.Reload(), waitVisible("#chart canvas"))
	var width float64
	b.run(chromedp.Evaluate(`document.querySelector("#chart canvas").getBoundingClientRect().right`, &width))
	if width > 390 {
		t.Errorf("on a phone the chart runs off the screen: right edge at %.0f px", width)
	}
	b.shot("06-stats-phone")
	b.run(chromedp.EmulateViewport(1280, 900))

	// Download the QR code as PNG and decode it.
	b.run(chromedp.Navigate(p.base+"/ui/links/"+code), waitVisible("#qr-png"), click("#qr-png"))
	var file string
	select {
	case file = <-b.dl:
	case <-time.After(30 * time.Second):
		t.Fatal("the QR download did not finish")
	}
	if got := decodeQR(t, file); got != short {
		t.Fatalf("the QR code says %q, want %q", got, short)
	}

	// A post from another origin (same site, another port) with the
	// session's cookie and even its CSRF token (as if it had leaked):
	// refused by its origin, nothing stored.
	var token string
	b.run(valueOf(`input[name="csrf"]`, &token))
	b.expect()
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><title>win a prize</title><form id="f" method="post" action="%s/ui/links">
<input name="url" value="https://evil.example/"><input name="csrf" value="%s"></form>
<script>document.getElementById("f").submit()</script>`, p.base, token)
	}))
	defer evil.Close()
	b.run(chromedp.Navigate(evil.URL), waitVisible("main h1"))
	if h := b.text("main h1"); h != "Refused" {
		t.Fatalf("a cross-origin post was answered %q at %s", h, b.location())
	}
	if st, m, _, _ := callAs(key, "GET", p.base+"/api/v1/links?q=evil.example", ""); st != 200 || len(m["links"].([]any)) != 0 {
		t.Fatalf("the cross-origin post stored a link: %d %v", st, m)
	}
	b.expect("403")

	// Delete (the page asks first; the test says yes) and see the 410.
	b.run(chromedp.Navigate(p.base+"/ui/links/"+code), waitVisible("#delete"),
		click("#delete"), waitVisible(".flash"))
	if s := b.text(".flash"); !strings.Contains(s, "Deleted "+code) {
		t.Fatalf("after delete: %q", s)
	}
	// (An address this browser followed may stay cached for 90 s.)
	b.run(chromedp.Navigate(short+"?after=delete"), waitVisible("h1"))
	if h := b.text("h1"); h != "Link removed" {
		t.Fatalf("the deleted link's page says %q", h)
	}
	b.shot("07-gone")
	b.expect("410")

	// Sign out.
	b.run(chromedp.Navigate(p.base+"/ui/"), waitVisible("#signout"), click("#signout"),
		waitVisible("#key"))
	b.run(chromedp.Navigate(p.base+"/ui/links"), waitVisible("#key"))
	b.clean()
}

// TestBrowserAdminPages signs an admin in on a three-node cluster: the
// cluster page lists every node, alive, and refreshes; a key made on the
// keys page is shown once and works.
func TestBrowserAdminPages(t *testing.T) {
	b := newTab(t)
	procs := startCluster(t, 3)
	if procs == nil {
		return
	}
	base := procs[1].base
	b.run(chromedp.Navigate(base+"/ui/login"), waitVisible("#key"),
		typeIn("#key", testAdminKey), submit("#key"),
		waitVisible("#shorten"))
	b.run(click(`nav a[href="/ui/admin/cluster"]`), waitVisible("#nodes"))
	testkit.Eventually(t, 30*time.Second, func() error {
		rows := b.text("#nodes tbody")
		for _, n := range []string{"n1", "n2", "n3"} {
			if !strings.Contains(rows, n) {
				return fmt.Errorf("the cluster page lacks %s: %q", n, rows)
			}
		}
		if strings.Count(rows, "alive") != 3 {
			return fmt.Errorf("the cluster page shows %d alive nodes: %q", strings.Count(rows, "alive"), rows)
		}
		return nil
	})
	// The table is refreshed in place (htmx, every 3 s): mark it and see
	// the mark go.
	b.run(chromedp.Evaluate(`document.querySelector("#nodes").dataset.seen = "1"`, nil))
	testkit.Eventually(t, 15*time.Second, func() error {
		var seen string
		b.run(chromedp.Evaluate(`document.querySelector("#nodes").dataset.seen || ""`, &seen))
		if seen != "" {
			return fmt.Errorf("not refreshed yet")
		}
		return nil
	})
	if loc := b.location(); loc != base+"/ui/admin/cluster" {
		t.Fatalf("after a refresh the address is %s", loc)
	}
	b.shot("08-cluster")

	b.run(click(`nav a[href="/ui/admin/keys"]`), waitVisible("#f-name"),
		typeIn("#f-name", "from-the-browser"), typeIn("#f-owner", "web"),
		click("#new-key-form button[type=submit]"), waitVisible("#secret"))
	var secret string
	b.run(valueOf("#secret", &secret))
	if st, _, _, err := callAs(secret, "GET", procs[2].base+"/api/v1/links", ""); err != nil || st != 200 {
		t.Fatalf("the key made in the browser: %d %v", st, err)
	}
	b.shot("09-keys")
	b.clean()
}

// The page is driven through JavaScript run in whatever document is
// current, each step retried until it takes or the step's time runs out:
// a form's submit, a link or htmx swaps the document, and chromedp's DOM
// node actions fail on a node of the old one ("Not attached to an active
// page"). Clicks run after the call returns, so that a confirm dialog
// (answered by the tab's listener) does not hold the call.

// poll evaluates js until it returns true, retrying errors.
func poll(what, js string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		var last error
		for {
			var ok bool
			err := chromedp.Evaluate(js, &ok).Do(ctx)
			if err == nil && ok {
				return nil
			}
			last = err
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s (last look: %v): %w", what, last, ctx.Err())
			case <-time.After(50 * time.Millisecond): // the next look at the page
			}
		}
	})
}

// el is a JS expression for the element sel matches.
func el(sel string) string { return fmt.Sprintf("document.querySelector(%q)", sel) }

// waitVisible waits until an element that sel matches is shown.
func waitVisible(sel string) chromedp.Action {
	return poll("waiting for "+sel, fmt.Sprintf(`(() => { const e = %s; return !!e && !!(e.offsetWidth || e.offsetHeight || e.getClientRects().length); })()`, el(sel)))
}

// click clicks the element sel matches.
func click(sel string) chromedp.Action {
	return poll("clicking "+sel, fmt.Sprintf(`(() => { const e = %s; if (!e) return false; setTimeout(() => e.click(), 0); return true; })()`, el(sel)))
}

// typeIn puts text in the field sel matches, as typing would.
func typeIn(sel, text string) chromedp.Action {
	return poll("typing in "+sel, fmt.Sprintf(`(() => { const e = %s; if (!e) return false; e.focus(); e.value = %q;
  e.dispatchEvent(new Event("input", {bubbles: true})); return true; })()`, el(sel), text))
}

// submit submits the form of the field sel matches, as Enter would.
func submit(sel string) chromedp.Action {
	return poll("submitting "+sel, fmt.Sprintf(`(() => { const e = %s; if (!e || !e.form) return false; setTimeout(() => e.form.requestSubmit(), 0); return true; })()`, el(sel)))
}

// read evaluates expr (of e, the element sel matches) into out once the
// element is there.
func read(sel, expr string, out *string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		js := fmt.Sprintf(`(() => { const e = %s; return e ? String(%s) : null; })()`, el(sel), expr)
		var last error
		for {
			var v *string
			err := chromedp.Evaluate(js, &v).Do(ctx)
			if err == nil && v != nil {
				*out = *v
				return nil
			}
			last = err
			select {
			case <-ctx.Done():
				return fmt.Errorf("reading %s (last look: %v): %w", sel, last, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
}

func valueOf(sel string, out *string) chromedp.Action { return read(sel, "e.value", out) }
func textOf(sel string, out *string) chromedp.Action  { return read(sel, "e.innerText", out) }
func attrOf(sel, name string, out *string) chromedp.Action {
	return read(sel, fmt.Sprintf("e.getAttribute(%q)", name), out)
}

// sumHumans adds the human clicks of the chart's series.
func sumHumans(t *testing.T, series string) int {
	t.Helper()
	i := strings.Index(series, `"humans":[`)
	if i < 0 {
		t.Fatalf("series %q", series)
	}
	rest := series[i+len(`"humans":[`):]
	rest = rest[:strings.IndexByte(rest, ']')]
	sum := 0
	for _, f := range strings.Split(rest, ",") {
		n, _ := strconv.Atoi(f)
		sum += n
	}
	return sum
}

// decodeQR reads the QR code in the PNG file.
func decodeQR(t *testing.T, file string) string {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	img, _, err := image.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("the download is no image: %v", err)
	}
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		t.Fatal(err)
	}
	res, err := qrcode.NewQRCodeReader().Decode(bmp, nil)
	if err != nil {
		t.Fatalf("decode the QR code: %v", err)
	}
	return res.GetText()
}
