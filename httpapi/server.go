// Package httpapi is linkraft's HTTP layer: redirects, the public REST API
// (/api/v1), the admin API (/admin/v1), health and metrics, on a gorilla/mux
// router. Handlers decode and validate input, call the Service, and map
// errors to RFC 9457 problem documents in exactly one place (Error).
package httpapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/internal/backup"
	"github.com/linkraft/linkraft/internal/password"
	"github.com/linkraft/linkraft/internal/status"
	"github.com/linkraft/linkraft/link"
)

// The HTTP layer's view of the node is four roles, each declared here as
// the handlers need it (wtf's DialService and UserService, rqlite's Store
// and Cluster): a handler test fakes only the roles it uses.

// Links is what the link routes and the redirects need.
type Links interface {
	Create(ctx context.Context, req link.CreateRequest) (*link.Link, error)
	CreateMany(ctx context.Context, reqs []link.CreateRequest) []link.CreateResult
	// CreateOnce and CreateManyOnce are Create and CreateMany for a
	// request with an Idempotency-Key; replayed reports a retry.
	CreateOnce(ctx context.Context, req link.CreateRequest, idem link.Idempotency) (l *link.Link, replayed bool, err error)
	CreateManyOnce(ctx context.Context, reqs []link.CreateRequest, idem link.Idempotency) ([]link.CreateResult, bool, error)
	Get(ctx context.Context, code string, consistent bool) (*link.Link, error)
	Resolve(ctx context.Context, code string) (*link.Link, error)
	// ResolveLocal answers from this node's state alone, never waiting.
	ResolveLocal(code string) (*link.Link, bool)
	Update(ctx context.Context, code string, p link.Patch) (*link.Link, error)
	Delete(ctx context.Context, code string) error
	// ConsumeVisit grants one visit of a link with a visit limit.
	ConsumeVisit(ctx context.Context, code string) (*link.Link, error)
	// List returns one page of a listing across the cluster; Tags the
	// most used tags of owner's (or every owner's) links.
	List(ctx context.Context, q link.ListQuery) (link.ListPage, error)
	Tags(ctx context.Context, owner string, limit int) ([]link.TagCount, bool, error)
}

// Keys is what authentication, the keys routes and the blocklist need.
type Keys interface {
	// Authenticate returns the key of a secret, or apikey.ErrUnauthorized.
	Authenticate(secret string) (apikey.Key, error)
	// Key returns the key with id, or apikey.ErrNotFound (revoked or
	// never made).
	Key(id string) (apikey.Key, error)
	List() ([]apikey.Key, error)
	Create(ctx context.Context, req apikey.Request) (string, apikey.Key, error)
	// Revoke deletes a key; apikey.ErrNotFound for an unknown ID.
	Revoke(ctx context.Context, id string) error
	SetBlocked(ctx context.Context, domain string, blocked bool) error
	Blocklist() (map[string]time.Time, error)
	// Blocked reports a blocked destination host; BlockedURL a stored URL
	// whose host is blocked.
	Blocked(host string) bool
	BlockedURL(u string) bool
}

// Admin is what the admin routes and the health probes need.
type Admin interface {
	Status() status.Cluster
	// Ready is nil when the node serves; else why not (status.ErrNotReady).
	Ready(ctx context.Context) error
	// RemoveNode removes a member; status.ErrUnknownNode for a stranger.
	RemoveNode(ctx context.Context, id string) error
	// DrainNode starts (on) or calls off moving a member's replicas away;
	// status.ErrCannotDrain when no node could take them. DrainStatus
	// reports a drain's progress.
	DrainNode(ctx context.Context, id string, on bool) error
	DrainStatus(id string) (draining bool, replicas int, err error)
	Leases() ([]status.Lease, error)
	Digests() ([]status.Digest, error)
	// ForEachLink walks the links stored on this node (its replicas).
	ForEachLink(fn func(l *link.Link) bool) error
	// LiveNodes is how many nodes answer redirects: the per-link guess
	// limit on password links is shared among them (password.go).
	LiveNodes() int
	// Backup writes the whole cluster to w; Restore puts a backup read
	// from r into the cluster (resume: one that was cut short).
	Backup(ctx context.Context, w io.Writer) (*backup.Manifest, error)
	Restore(ctx context.Context, r io.Reader, resume bool) (*backup.Report, error)
}

// Analytics is what the stats routes and the redirect rules need.
type Analytics interface {
	// Stats returns a link's click statistics with the link (deleted
	// links too); ClickCount its human clicks so far.
	Stats(ctx context.Context, code string, q link.StatsQuery) (*link.Link, *link.Stats, error)
	ClickCount(ctx context.Context, code string) (uint64, error)
	Visits(ctx context.Context, code string, from, to time.Time, limit int) ([]link.Visit, link.Gathered, error)
	Orphans(ctx context.Context, top int) (link.OrphanSummary, link.Gathered)
	// IsBot tells bots apart: they are redirected without using up a
	// limited link's visits. Platform names a User-Agent's device and
	// Country an address's country for redirect rules ("" and "unknown"
	// when not known).
	IsBot(userAgent string) bool
	Platform(userAgent string) string
	Country(ip netip.Addr) string
}

// ClickRecorder takes redirects for analytics without blocking
// (implemented by *analytics.Pipeline). Record copies the click's strings
// before it returns: they may be views of a buffer the caller reuses.
type ClickRecorder interface {
	Record(c link.Click) bool
	RecordOrphan(code string)
}

// Recorder receives request measurements (implemented by metrics.Metrics).
type Recorder interface {
	Redirect(status int, d time.Duration)
	Request(route, method string, status int, d time.Duration)
}

// DefaultMaxBodyBytes bounds a request body.
const DefaultMaxBodyBytes = 64 << 10

// Config configures a Server.
type Config struct {
	// Links, Keys, Admin and Analytics are the node's roles; Links and
	// Keys are required. Without Admin the server speaks for a node of
	// one, always ready, whose admin reads answer 503 (roles.go); without
	// Analytics there are no statistics, no bots, and rules know no device
	// or country.
	Links     Links
	Keys      Keys
	Admin     Admin
	Analytics Analytics
	// PublicURL is the base of short_url ("http://localhost:8080").
	PublicURL string
	// URLPolicy validates destination URLs. The public URL's host is added
	// to its OwnHosts.
	URLPolicy link.URLPolicy
	// MaxBodyBytes bounds request bodies (default 64 KiB).
	MaxBodyBytes int64
	// MaxBulkBodyBytes bounds the body of POST /api/v1/links/bulk
	// (default 8 MiB: MaxBulkLinks links with long URLs).
	MaxBulkBodyBytes int64
	// Metrics, if set, renders GET /metrics.
	Metrics http.Handler
	// Recorder, if set, receives latencies.
	Recorder Recorder
	// Logger receives internal errors.
	Logger *slog.Logger
	// Now is the clock for expiry checks (default time.Now).
	Now func() time.Time
	// Clicks, if set, receives every GET redirect (analytics on).
	Clicks ClickRecorder
	// AnonymousCreate lets POST /api/v1/links through without a key: the
	// link's owner is "anonymous", and AnonymousRate limits each client
	// network.
	AnonymousCreate bool
	// KeyRate limits each non-admin key (zero: DefaultKeyRate; a negative
	// PerSecond: no limit); a key's own rate_limit replaces it.
	KeyRate Rate
	// AnonymousRate limits anonymous creates per client network (zero:
	// DefaultAnonymousRate; a negative PerSecond: no limit).
	AnonymousRate Rate
	// RedirectRate limits GET and HEAD /{code} per client network (zero:
	// no limit, the default): against scraping and code enumeration.
	RedirectRate Rate
	// RenderRate limits the pages that cost a render, /{code}/qr and the
	// preview /{code}+, per client network (zero: no limit): a QR code
	// takes milliseconds of CPU, so unlimited renders from one client take
	// the cores the redirects need.
	RenderRate Rate
	// TrustedProxies are the networks whose Forwarded and X-Forwarded-For
	// headers name the client (clientip.go); nobody else's are read.
	TrustedProxies []netip.Prefix
	// CORSOrigins are the browser origins (scheme://host[:port]) allowed
	// to call /api/v1 from their pages; "*" allows any. None by default.
	CORSOrigins []string
	// Pprof serves /debug/pprof/* on the admin handler.
	Pprof bool
	// MaxImportBytes bounds an import's body (DefaultMaxImportBytes when
	// 0); it is read a chunk at a time.
	MaxImportBytes int64
	// Passwords hashes and checks link passwords (a password.New with
	// its defaults when nil).
	Passwords *password.Hasher
}

// Server is the HTTP handler of a node.
type Server struct {
	router      *mux.Router
	links       Links
	keys        Keys
	admin       Admin
	analytics   Analytics
	publicURL   string
	policy      link.URLPolicy
	maxBody     int64
	maxBulkBody int64
	maxImport   int64
	rec         Recorder
	log         *slog.Logger
	now         func() time.Time
	clicks      ClickRecorder

	adminRouter     *mux.Router
	anonymousCreate bool
	keyRate         Rate
	anonRate        Rate
	limiter         *limiter
	redirRate       Rate
	redirLimiter    *limiter
	renderRate      Rate
	renderLimiter   *limiter
	proxies         trustedProxies
	cors            map[string]bool
	corsAny         bool
	// qrSlots bounds the QR codes rendered at once (qrRenders).
	qrSlots chan struct{}
	qrWait  time.Duration
	// passwords hashes and checks link passwords; guesses limits the
	// guesses at them (password.go).
	passwords *password.Hasher
	guesses   *limiter
	// guessed remembers which client networks guessed a link's password
	// wrong lately: only they spend the link's own guess budget.
	guessed *suspects
}

// New builds the router.
func New(cfg Config) (*Server, error) {
	pub := strings.TrimRight(cfg.PublicURL, "/")
	if pub == "" {
		pub = "http://localhost:8080"
	}
	u, err := url.Parse(pub)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &link.FieldError{Err: link.ErrInvalidInput, Field: "public-url", Reason: "must be an absolute http(s) URL"}
	}
	policy := cfg.URLPolicy
	policy.OwnHosts = append(append([]string(nil), policy.OwnHosts...), strings.ToLower(u.Hostname()))
	s := &Server{
		router: mux.NewRouter(), links: cfg.Links, keys: cfg.Keys, admin: cfg.Admin, analytics: cfg.Analytics, publicURL: pub, policy: policy,
		maxBody: cfg.MaxBodyBytes, maxBulkBody: cfg.MaxBulkBodyBytes, rec: cfg.Recorder, log: cfg.Logger, now: cfg.Now, clicks: cfg.Clicks,
		adminRouter: mux.NewRouter(), anonymousCreate: cfg.AnonymousCreate,
		keyRate: cfg.KeyRate, anonRate: cfg.AnonymousRate, proxies: trustedProxies(cfg.TrustedProxies),
		cors: map[string]bool{}, qrSlots: make(chan struct{}, qrRenders), qrWait: qrWait,
	}
	if s.links == nil || s.keys == nil {
		return nil, errors.New("httpapi: Config needs Links and Keys")
	}
	if s.admin == nil {
		s.admin = noAdmin{}
	}
	if s.analytics == nil {
		s.analytics = noAnalytics{}
	}
	if s.keyRate == (Rate{}) {
		s.keyRate = DefaultKeyRate
	}
	if s.anonRate == (Rate{}) {
		s.anonRate = DefaultAnonymousRate
	}
	for _, o := range cfg.CORSOrigins {
		if !corsOriginValid(o) {
			return nil, &link.FieldError{Err: link.ErrInvalidInput, Field: "cors-origins", Reason: "each origin must be * or scheme://host[:port], as the Origin header has it: " + o}
		}
		if o == "*" {
			s.corsAny = true
		}
		s.cors[strings.TrimRight(o, "/")] = true
	}
	if s.policy.Blocked == nil {
		s.policy.Blocked = cfg.Keys.Blocked
	}
	if s.maxImport = cfg.MaxImportBytes; s.maxImport <= 0 {
		s.maxImport = DefaultMaxImportBytes
	}
	if s.maxBulkBody <= 0 {
		s.maxBulkBody = DefaultMaxBulkBodyBytes
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.limiter = newLimiter(s.now)
	s.redirRate, s.redirLimiter = cfg.RedirectRate, newLimiter(s.now)
	s.renderRate, s.renderLimiter = cfg.RenderRate, newLimiter(s.now)
	s.passwords, s.guesses, s.guessed = cfg.Passwords, newLimiter(s.now), newSuspects(s.now)
	if s.passwords == nil {
		s.passwords = password.New(password.Config{})
	}
	if s.rec == nil {
		s.rec = nopRecorder{}
	}
	notFound := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.problem(w, r, http.StatusNotFound, "not-found", "Not Found", "no such resource")
	})
	for _, rt := range []*mux.Router{s.router, s.adminRouter} {
		rt.NotFoundHandler = notFound
		rt.MethodNotAllowedHandler = http.HandlerFunc(s.methodNotAllowed(rt))
		s.registerHealthRoutes(rt)
		s.registerKeyRoutes(rt)
	}
	// The admin listener: the admin API, metrics and profiles; the public
	// one answers 404 for them.
	s.registerAdminRoutes(cfg.Metrics, cfg.Pprof)
	s.registerOpenAPIRoute()
	s.registerLinkRoutes()
	s.registerStatsRoutes()
	s.registerQRRoutes()
	s.registerRedirectRoutes() // last: /{code} must not shadow the fixed routes
	return s, nil
}

// Admin returns the handler of the admin listener: /admin/v1/* (an admin
// key), /metrics (no key), /debug/pprof/* (when Config.Pprof), the keys and
// blocklist API (served on the public listener too), /healthz and /readyz.
func (s *Server) Admin() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["X-Content-Type-Options"] = nosniff
		defer s.recoverPanic(w, r)
		if s.malformedQuery(w, r) {
			return
		}
		s.adminRouter.ServeHTTP(w, r)
	})
}

func (s *Server) recoverPanic(w http.ResponseWriter, r *http.Request) {
	if p := recover(); p != nil {
		if p == http.ErrAbortHandler {
			panic(p)
		}
		s.log.Error("panic in handler", "method", r.Method, "path", r.URL.Path, "panic", p)
		s.problem(w, r, http.StatusInternalServerError, "internal", "Internal Server Error", "")
	}
}

type nopRecorder struct{}

func (nopRecorder) Redirect(int, time.Duration)                {}
func (nopRecorder) Request(string, string, int, time.Duration) {}

// nosniff is the X-Content-Type-Options value, shared by every response
// (net/http only reads header values; an Add would copy it on append).
var nosniff = []string{"nosniff"}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header()["X-Content-Type-Options"] = nosniff
	defer s.recoverPanic(w, r)
	// GET and HEAD of /{code}, the hot path, skip the router: its regular
	// expressions and the request copy it makes for the path variables.
	if code, ok := redirectCode(r); ok {
		s.handleRedirect(w, r, code)
		return
	}
	if strings.HasPrefix(r.URL.Path, "/api/") && s.corsHeaders(w, r) {
		return // a preflight, answered
	}
	if s.malformedQuery(w, r) {
		return
	}
	s.router.ServeHTTP(w, r)
}

// malformedQuery answers 400 for an API request (/api/, /admin/) whose
// query string does not parse (a bad %-escape, a semicolon): net/http
// would drop the pair without a word, and a client whose cursor or filter
// was mangled would get the first page, or every link, as if it had asked
// for them. The pages people open (redirects, which forward what parses,
// previews, QR codes, password forms) and the health probes are spared.
func (s *Server) malformedQuery(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.RawQuery == "" || !strings.HasPrefix(r.URL.Path, "/api/") && !strings.HasPrefix(r.URL.Path, "/admin/") {
		return false
	}
	if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
		s.problem(w, r, http.StatusBadRequest, "invalid-input", "Bad Request", "the query string is malformed: "+err.Error())
		return true
	}
	return false
}

// methodNotAllowed answers 405 with the Allow header of the matched path.
func (s *Server) methodNotAllowed(rt *mux.Router) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		var allowed []string
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPatch, http.MethodDelete} {
			probe := r.Clone(r.Context())
			probe.Method = m
			var match mux.RouteMatch
			if rt.Match(probe, &match) && match.MatchErr == nil {
				allowed = append(allowed, m)
			}
		}
		if len(allowed) > 0 {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
		}
		s.problem(w, r, http.StatusMethodNotAllowed, "method-not-allowed", "Method Not Allowed",
			r.Method+" is not allowed here")
	}
}

// fixedRoute serves path with h for methods, and answers its other methods
// 405 with Allow: methods. Registered before a pattern that also matches
// path (/api/v1/links/{code} matches /api/v1/links/bulk-delete), it keeps
// the fixed path's other methods from being answered as if it were a code.
func (s *Server) fixedRoute(path string, h http.HandlerFunc, methods ...string) {
	s.router.HandleFunc(path, h).Methods(methods...)
	allow := strings.Join(methods, ", ")
	s.router.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		s.problem(w, r, http.StatusMethodNotAllowed, "method-not-allowed", "Method Not Allowed", r.Method+" is not allowed here")
	})
}

// statusWriter remembers the status for metrics.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (deadlines,
// flushes) through the wrapper.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// measured wraps an API handler with its latency histogram.
func (s *Server) measured(route string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		s.rec.Request(route, r.Method, sw.status, time.Since(start))
	}
}
