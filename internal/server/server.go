// Package server assembles Kassa's services behind one HTTP listener and runs their background work.
package server

import (
	"cmp"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/kassapay/kassa/internal/apidocs"
	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/branding"
	"github.com/kassapay/kassa/internal/cardenc"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/dashboard"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/hostedpage"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/idempotency"
	"github.com/kassapay/kassa/internal/invoice"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/metrics"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/plan"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/accounts"
	"github.com/kassapay/kassa/internal/processor/simulator"
	"github.com/kassapay/kassa/internal/report"
	"github.com/kassapay/kassa/internal/signin"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/user"
	"github.com/kassapay/kassa/internal/vault"
	"github.com/kassapay/kassa/internal/velocity"
	"github.com/kassapay/kassa/internal/webhook"
	"github.com/kassapay/kassa/web"
)

// Config configures a Server.
type Config struct {
	DB     *store.DB
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// RevocationPoll is how often revocations made elsewhere are loaded (default auth.DefaultRevocationPoll, 5 s).
	RevocationPoll time.Duration
	// ShutdownTimeout bounds how long in-flight requests may take to finish at shutdown (default 30 s).
	ShutdownTimeout time.Duration
	// Processor moves the money; default the built-in simulator configured by Simulator.
	Processor processor.Processor
	// Simulator configures the built-in simulator when Processor is nil.
	Simulator simulator.Config
	// Connectors are the kinds of processor, beside the simulator, that a merchant can be connected
	// to (processor accounts, set with `kassa merchant update --processor`).
	Connectors []processor.Kind
	// ProcessorRefresh is how often a merchant's change of processor made on another node is read
	// (default and at most accounts.DefaultRefreshInterval).
	ProcessorRefresh time.Duration
	// ProcessorTimeout bounds one processor call (default 30 s).
	ProcessorTimeout time.Duration
	// RecoveryInterval is how often abandoned attempts, and abandoned operations on payment intents,
	// are looked for (default 30 s).
	RecoveryInterval time.Duration
	// MerchantCacheTTL is how long merchant settings are served from memory (default 5 s).
	MerchantCacheTTL time.Duration
	// KEK is the key-encryption key under which secrets at rest are sealed (required).
	KEK *envelope.KEK
	// Billing configures the billing engine; its DB, Vault, Merchants, Logger and Now are filled in,
	// and the invoices' task (overdue and reminders) is added to its Tasks.
	Billing billing.Config
	// NoBillingEngine keeps this node from billing subscriptions and from marking invoices overdue and
	// reminding them (an API-only node of a cluster).
	NoBillingEngine bool
	// CodeTTL is how long an authorization code lives (default 60 s, at most 10 min).
	CodeTTL time.Duration
	// PublicURL is the base of the URLs the server hands out (hosted-page sessions); with https,
	// cookies are Secure and every answer carries Strict-Transport-Security.
	PublicURL string
	// TLS says that the listener given to Serve serves HTTPS (kassa serve --tls-cert): every answer
	// then carries Strict-Transport-Security, whatever PublicURL says.
	TLS bool
	// APIKeyCacheTTL is how long v1 API keys, and merchants' approvals of partners, are served from
	// memory: the most a key deleted on another node keeps working on this one. It defaults to the
	// revocation poll and is never longer, so that revoking a partner's client stops its keys within
	// the poll, as it stops its tokens.
	APIKeyCacheTTL time.Duration
	// SweepInterval is how often expired payment methods lose their card numbers, velocity counts of
	// ended windows are dropped, and the expiry of hosted-page sessions is recorded (default 1
	// minute). Abandoned operations on payment intents are settled every RecoveryInterval.
	SweepInterval time.Duration
	// TrustedProxies are the peers whose X-Forwarded-For names the client (httpapi.Proxies);
	// default none.
	TrustedProxies httpapi.Proxies
	// WebhooksAllowPrivate lets webhooks go to loopback and private addresses, and to http:// URLs
	// (`kassa serve --webhooks-allow-private`: development and tests).
	WebhooksAllowPrivate bool
	// WebhookRootCAs, when set, are the certificate authorities deliveries trust instead of the
	// system's roots (`kassa serve --webhooks-ca-file`: webhook.RootsWith, the system's and the
	// operator's own).
	WebhookRootCAs *x509.CertPool
	// WebhookPoll is how often the delivery engine looks for due deliveries (default 500 ms).
	WebhookPoll time.Duration
	// Metrics, when not nil, is where the server's parts count what they do, and what the exposition
	// reads from the database at every scrape (kassa serve --metrics-addr).
	Metrics *metrics.Set
	// Wrap, when set, wraps the server's handler, outside all of its middleware, given the routes it
	// registered: tests hold every response to api/openapi.yaml with it (api/apitest).
	Wrap func(h http.Handler, routes []httpapi.Route) http.Handler
}

// Server is a configured Kassa server.
type Server struct {
	cfg        Config
	billing    *billing.Engine
	billingCfg billing.Config
	roller     *report.Roller
	auth       *auth.Service
	cardenc    *cardenc.Service
	ledger     *payment.Ledger
	accounts   *accounts.Service
	vault      *vault.Service
	checkout   *checkout.Service
	pages      *hostedpage.Service
	idem       *idempotency.Store
	velocity   *velocity.Limiter
	merchants  *merchant.Cache
	sessions   *user.Sessions
	router     *httpapi.Router
	handler    http.Handler
	webhooks   *webhook.Deliverer
}

// New builds the server: it loads what the services keep in memory and registers every route.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	if cfg.Processor == nil {
		sim := cfg.Simulator
		if sim.Now == nil {
			sim.Now = cfg.Now
		}
		cfg.Processor = simulator.New(sim)
	}
	if cfg.KEK == nil {
		return nil, errors.New("server: a key-encryption key is required")
	}
	ring, err := envelope.NewKeyring(ctx, cfg.DB, cfg.KEK, cfg.Now)
	if err != nil {
		return nil, err
	}
	if n, err := billing.SealOutbox(ctx, cfg.DB); err != nil {
		return nil, err
	} else if n > 0 {
		cfg.Logger.InfoContext(ctx, "sealed the e-mails that an earlier version kept in the outbox in clear", "messages", n)
	}
	if cfg.RevocationPoll <= 0 {
		cfg.RevocationPoll = auth.DefaultRevocationPoll
	}
	if cfg.APIKeyCacheTTL <= 0 || cfg.APIKeyCacheTTL > cfg.RevocationPoll {
		cfg.APIKeyCacheTTL = cfg.RevocationPoll
	}
	a, err := auth.NewService(ctx, auth.Config{DB: cfg.DB, Logger: cfg.Logger, Now: cfg.Now, RevocationPoll: cfg.RevocationPoll,
		CodeTTL: cfg.CodeTTL, Keyring: ring, Metrics: cfg.Metrics})
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, auth: a, router: httpapi.NewRouter(),
		cardenc: cardenc.New(cardenc.Config{DB: cfg.DB, Keyring: ring, Now: cfg.Now})}
	if s.velocity, err = velocity.New(ctx, velocity.Config{DB: cfg.DB, Keyring: ring, Now: cfg.Now}); err != nil {
		return nil, err
	}
	s.accounts = accounts.New(accounts.Config{DB: cfg.DB, Keyring: ring, Kinds: cfg.Connectors, Simulator: cfg.Processor,
		Now: cfg.Now, Logger: cfg.Logger, RefreshInterval: cfg.ProcessorRefresh})
	if err := s.accounts.Refresh(ctx); err != nil {
		return nil, err
	}
	s.ledger = payment.New(payment.Config{DB: cfg.DB, Processors: s.accounts, Logger: cfg.Logger, Now: cfg.Now,
		ProcessorTimeout: cfg.ProcessorTimeout, RecoveryInterval: cfg.RecoveryInterval, Velocity: s.velocity, Metrics: cfg.Metrics})
	if cfg.ProcessorTimeout <= 0 {
		cfg.ProcessorTimeout = payment.DefaultProcessorTimeout
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = time.Minute
	}
	s.cfg = cfg
	// A first request with a key is presumed dead, and its key free, once its attempt's lease is over.
	if s.idem, err = idempotency.New(ctx, idempotency.Config{DB: cfg.DB, Keyring: ring, Now: cfg.Now, Lock: 2 * cfg.ProcessorTimeout}); err != nil {
		return nil, err
	}
	merchants := merchant.NewCache(cfg.DB, cfg.MerchantCacheTTL, cfg.Now)
	s.merchants = merchants

	r := s.router
	r.HandleFunc("GET", "/healthz", func(w http.ResponseWriter, _ *http.Request) {
		httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.HandleFunc("GET", "/readyz", s.ready)
	r.Handle("POST", "/oauth/token", a.TokenHandler())
	r.Handle("POST", "/oauth/revoke", a.RevokeHandler())
	r.Handle("DELETE", "/oauth/revoke_token", a.RevokeTokenHandler())
	factors := user.NewTwoFactor(cfg.DB, ring)
	signin.New(signin.Config{Auth: a, DB: cfg.DB, TwoFactor: factors, SecureCookies: httpsURL(cfg.PublicURL), Proxies: cfg.TrustedProxies, Now: cfg.Now}).Routes(r)
	// Dashboard sessions learn of changes made on other nodes at the pace of token revocations.
	s.sessions = user.NewSessions(user.SessionConfig{DB: cfg.DB, Logger: cfg.Logger, Now: cfg.Now, Poll: cfg.RevocationPoll})
	r.HandleFunc("GET", "/js/{file}", web.ServeScripts)
	r.Handle("GET", "/docs/api", apidocs.Handler())
	payment.NewService(s.ledger, merchants, s.cardenc).Routes(r, s.gateway)
	v, err := vault.New(ctx, vault.Config{DB: cfg.DB, Keyring: ring, Ledger: s.ledger, Merchants: merchants, Tokens: s.cardenc, Now: cfg.Now})
	if err != nil {
		return nil, err
	}
	v.Routes(r, s.gateway)
	s.vault = v
	s.checkout = checkout.New(checkout.Config{DB: cfg.DB, Ledger: s.ledger, Vault: v, Merchants: merchants, Idempotency: s.idem,
		Logger: cfg.Logger, Now: cfg.Now, KeyCacheTTL: cfg.APIKeyCacheTTL, ProcessorTimeout: cfg.ProcessorTimeout, Velocity: s.velocity})
	s.checkout.Routes(r)
	endpoints := webhook.NewEndpoints(webhook.EndpointsConfig{DB: cfg.DB, Keyring: ring, Now: cfg.Now, AllowPrivate: cfg.WebhooksAllowPrivate})
	endpoints.Routes(r, s.checkout)
	pages := hostedpage.New(hostedpage.Config{DB: cfg.DB, Checkout: s.checkout, Vault: v, Merchants: merchants, PublicURL: cfg.PublicURL,
		Logger: cfg.Logger, Now: cfg.Now, Velocity: s.velocity, Ledger: s.ledger})
	pages.Routes(r)
	s.pages = pages
	r.HandleFunc("GET", "/brand/logo/{file}", branding.ServeLogo(cfg.DB))
	r.HandleFunc("GET", "/favicon.ico", branding.Favicon)
	webhook.RegisterEventRoutes(r, s.checkout, cfg.DB)
	plans := plan.New(cfg.DB, merchants, cfg.Now)
	plans.Routes(r, s.gateway)
	invoices, err := invoice.New(ctx, invoice.Config{DB: cfg.DB, Merchants: merchants, PublicURL: cfg.PublicURL, Now: cfg.Now,
		Checkout: s.checkout, Pages: pages, Vault: v, Ledger: s.ledger, Keyring: ring, Velocity: s.velocity, Proxies: cfg.TrustedProxies, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	invoices.Routes(r, s.invoices)
	s.billingCfg = cfg.Billing
	s.billingCfg.DB, s.billingCfg.Vault, s.billingCfg.Logger, s.billingCfg.Now = cfg.DB, v, cfg.Logger, cfg.Now
	s.billingCfg.PublicURL = cfg.PublicURL
	// Invoices become OVERDUE and are reminded by the billing engine's scheduler, once across nodes.
	s.billingCfg.Tasks = append(slices.Clip(s.billingCfg.Tasks), invoices.RunDue)
	if s.billingCfg.Metrics == nil {
		s.billingCfg.Metrics = cfg.Metrics
	}
	s.billing = billing.New(s.billingCfg)
	v.OnDue(s.billing.Kick)
	dashboard.New(dashboard.Config{Auth: a, DB: cfg.DB, Sessions: s.sessions, TwoFactor: factors,
		Processors: s.accounts, CardKeys: s.cardenc, Merchants: merchants, Ledger: s.ledger, Vault: v, Checkout: s.checkout,
		HostedPages: pages, Plans: plans, Billing: s.billing, Webhooks: endpoints, Invoices: invoices, Idempotency: s.idem,
		PublicURL: cfg.PublicURL, Proxies: cfg.TrustedProxies, Now: cfg.Now}).Routes(r)
	s.roller = report.NewRoller(report.RollerConfig{DB: cfg.DB, Logger: cfg.Logger})
	load := &httpapi.Load{}
	s.webhooks = webhook.New(webhook.Config{DB: cfg.DB, Keyring: ring, Logger: cfg.Logger, Now: cfg.Now, AllowPrivate: cfg.WebhooksAllowPrivate,
		RootCAs: cfg.WebhookRootCAs, Poll: cfg.WebhookPoll, Metrics: cfg.Metrics, Requests: load.Requests})
	s.handler = load.Count(httpapi.Middleware(cfg.Logger, cfg.Metrics, r))
	if cfg.TLS || httpsURL(cfg.PublicURL) {
		s.handler = httpapi.StrictTransport(s.handler)
	}
	if cfg.Metrics != nil {
		backend := map[store.Dialect]string{store.SQLite: "sqlite", store.Postgres: "postgres"}[cfg.DB.Dialect()]
		cfg.DB.ObserveBatches(func(n int) { cfg.Metrics.WriteBatch(backend, n) })
		cfg.Metrics.Observe(5*time.Second, s.state)
		cfg.Metrics.Connection(func() metrics.Connection {
			h := cfg.DB.Health()
			return metrics.Connection{Reconnects: h.Reconnects, Opened: h.Opened, Unavailable: h.Unavailable, Available: h.Available}
		})
	}
	if cfg.Wrap != nil {
		s.handler = cfg.Wrap(s.handler, r.Routes())
	}
	return s, nil
}

// httpsURL reports whether u is an https URL (its scheme in any case, as a URL's scheme is read).
func httpsURL(u string) bool {
	p, err := url.Parse(u)
	return err == nil && p.Scheme == "https"
}

// state is what the metrics exposition reads from the database at a scrape:
// pending attempts, billing's work, the outbox's and the webhooks' backlogs, and the pools.
func (s *Server) state(ctx context.Context) (metrics.State, error) {
	st := metrics.State{Pools: s.cfg.DB.Pools()}
	var err error
	if st.PendingAttempts, err = s.ledger.Pending(ctx); err != nil {
		return st, err
	}
	b, err := billing.Status(ctx, s.cfg.DB, s.cfg.Now())
	if err != nil {
		return st, err
	}
	st.BillingDue, st.BillingRetrying, st.Suspended, st.OutboxBacklog = b.Due, b.Retrying, b.Suspended, b.OutboxBacklog
	st.WebhookBacklog, err = webhook.Backlog(ctx, s.cfg.DB)
	return st, err
}

// gateway wraps a handler of the transaction, customer and plan services: a bearer token with the
// ecom scope, the request rate of its credential, a path and query a database can take as sent, then
// idempotency of POSTs per principal (merchant and client).
func (s *Server) gateway(h http.Handler) http.Handler {
	return s.auth.Require(auth.ScopeEcom, s.velocity.Requests(s.merchantLimits, httpapi.StorableRequest(s.idem.Middleware(h))))
}

// invoices wraps a handler of the invoice service as gateway wraps the others, with the invoice scope
// in place of ecom.
func (s *Server) invoices(h http.Handler) http.Handler {
	return s.auth.Require(auth.ScopeInvoice, s.velocity.Requests(s.merchantLimits, httpapi.StorableRequest(s.idem.Middleware(h))))
}

// merchantLimits are the velocity limits of the merchant of a request's bearer token. A merchant that
// cannot be read has the defaults here; the handler then answers for it.
func (s *Server) merchantLimits(r *http.Request) velocity.Limits {
	m, _ := s.merchants.Get(r.Context(), auth.ClaimsFrom(r.Context()).MerchantID)
	return m.Velocity
}

// ready answers 200 when the database answers, and 503 otherwise: not_ready when it cannot be reached
// (on PostgreSQL, when no session that takes writes answers within the store's write bound: a
// primary that hangs, or only a standby), storage_unavailable when a write failed for want of storage
// and a write still fails: readiness reflects both, the database out of reach and its storage full.
// It turns 200 again by itself once a primary answers: each check opens a connection where the pool
// has none that answers.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if err := s.cfg.DB.Ping(ctx); err != nil {
		httpapi.Logger(ctx).WarnContext(ctx, "readiness check failed", "err", err)
		httpapi.WriteError(w, r, &fault.Error{Status: http.StatusServiceUnavailable, Code: "not_ready",
			Message: "The database is not reachable, or takes no writes.", RetryAfter: 5 * time.Second})
		return
	}
	if err := s.cfg.DB.Writable(ctx); err != nil {
		httpapi.Logger(ctx).WarnContext(ctx, "readiness check failed: writes fail", "err", err)
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// Handler is the server's HTTP handler, middleware included.
func (s *Server) Handler() http.Handler { return s.handler }

// Routes lists every registered route.
func (s *Server) Routes() []httpapi.Route { return s.router.Routes() }

// DB is the server's database.
func (s *Server) DB() *store.DB { return s.cfg.DB }

// Auth is the token service, for callers that revoke or verify in-process.
func (s *Server) Auth() *auth.Service { return s.auth }

// CardEncryption keeps the merchants' card-encryption keys.
func (s *Server) CardEncryption() *cardenc.Service { return s.cardenc }

// Billing is the server's billing engine.
func (s *Server) Billing() *billing.Engine { return s.billing }

// BillingWorker returns another billing engine over the server's database and services, named node:
// a second worker, as another node of a cluster would run.
func (s *Server) BillingWorker(node string) *billing.Engine {
	cfg := s.billingCfg
	cfg.Node = node
	return billing.New(cfg)
}

// Vault is the customer vault, which also keeps payment methods.
func (s *Server) Vault() *vault.Service { return s.vault }

// HostedPages is the hosted payment page.
func (s *Server) HostedPages() *hostedpage.Service { return s.pages }

// Checkout is the v1 payments API.
func (s *Server) Checkout() *checkout.Service { return s.checkout }

// Ledger is the payments core.
func (s *Server) Ledger() *payment.Ledger { return s.ledger }

// Accounts are the merchants' processor accounts.
func (s *Server) Accounts() *accounts.Service { return s.accounts }

// Serve serves HTTP on ln and runs the background work until ctx is done, then shuts down
// gracefully: it stops accepting, lets in-flight requests finish (up to ShutdownTimeout), and stops
// the background work.
//
// Before it accepts a request it resolves the attempts a previous process left pending: all of them
// on SQLite, whose one server this process now is, and on PostgreSQL those whose lease has run out.
// Then it calls ready (when not nil) and starts accepting.
func (s *Server) Serve(ctx context.Context, ln net.Listener, ready func()) error {
	release, err := s.cfg.DB.ClaimServer()
	if err != nil {
		ln.Close()
		return err
	}
	defer release()
	single := s.cfg.DB.SingleServer()
	n, err := s.ledger.Recover(ctx, single)
	if err == nil && single {
		err = s.idem.ReleaseAll(ctx) // no request of a previous process is running any more
	}
	if err == nil && single {
		err = s.webhooks.ReleaseAll(ctx) // nor any webhook delivery: send them now, not after their lease
	}
	if err != nil {
		ln.Close()
		return fmt.Errorf("recover pending attempts: %w", err)
	}
	if n > 0 {
		s.cfg.Logger.Info("resolved attempts left pending by a previous process", "count", n)
	}
	if ready != nil {
		ready()
	}
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      90 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
	}
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { s.auth.Run(bg) })
	wg.Go(func() { s.sessions.Run(bg) })
	wg.Go(func() { s.ledger.Run(bg) })
	wg.Go(func() { s.accounts.Run(bg) })
	wg.Go(func() { s.roller.Run(bg) })
	wg.Go(func() { s.webhooks.Run(bg) })
	if !s.cfg.NoBillingEngine {
		wg.Go(func() { s.billing.Run(bg) })
	}
	wg.Go(func() { clock.Every(bg, time.Hour, s.cfg.Logger, "purge idempotency keys", s.idem.Purge) })
	wg.Go(func() { clock.Every(bg, time.Hour, s.cfg.Logger, "purge used card tokens", s.cardenc.Purge) })
	wg.Go(func() { clock.Every(bg, time.Hour, s.cfg.Logger, "purge sign-in counts", s.auth.PurgeSignIns) })
	wg.Go(func() {
		clock.Every(bg, time.Hour, s.cfg.Logger, "purge dashboard sessions and links", s.sessions.Purge)
	})
	wg.Go(func() { clock.Every(bg, s.cfg.SweepInterval, s.cfg.Logger, "payments API sweep", s.checkout.Sweep) })
	wg.Go(func() {
		clock.Every(bg, cmp.Or(s.cfg.RecoveryInterval, payment.DefaultRecoveryInterval), s.cfg.Logger, "payments API recovery", s.checkout.Recover)
	})
	wg.Go(func() { clock.Every(bg, s.cfg.SweepInterval, s.cfg.Logger, "velocity sweep", s.velocity.Sweep) })
	wg.Go(func() { clock.Every(bg, s.cfg.SweepInterval, s.cfg.Logger, "hosted page sweep", s.pages.Sweep) })
	wg.Go(func() { clock.Every(bg, time.Hour, s.cfg.Logger, "purge events", s.purgeEvents) })

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err = <-errc:
	case <-ctx.Done():
		s.cfg.Logger.Info("shutting down", "reason", context.Cause(ctx).Error())
		sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		err = hs.Shutdown(sctx)
		cancel()
		if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
			err = serr
		}
	}
	stopBG()
	wg.Wait()
	// Connectors that hold connections let them go (an ISO 8583 host is signed off).
	for _, k := range s.cfg.Connectors {
		if c, ok := k.(io.Closer); ok {
			if cerr := c.Close(); cerr != nil {
				s.cfg.Logger.Warn("close a connector", "kind", k.Name(), "err", cerr)
			}
		}
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// purgeEvents deletes the events past their retention: events are kept 30 days.
func (s *Server) purgeEvents(ctx context.Context) error {
	_, err := event.Purge(ctx, s.cfg.DB, s.cfg.Now())
	return err
}
