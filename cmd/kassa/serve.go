package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/metrics"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/private"
	"github.com/kassapay/kassa/internal/processor/simulator"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/tlscert"
	"github.com/kassapay/kassa/internal/webhook"
)

func serveCommand(fs *flag.FlagSet) func(context.Context, *env) error {
	addr := fs.String("addr", envOr("KASSA_ADDR", "127.0.0.1:8080"), "address to listen on (env KASSA_ADDR)")
	publicURL := fs.String("public-url", os.Getenv("KASSA_PUBLIC_URL"), "base of every URL the server hands out; default http://ADDR, or https://ADDR with --tls-cert (env KASSA_PUBLIC_URL)")
	demo := fs.Bool("demo", os.Getenv("KASSA_DEMO") == "1", "demo mode: on first start with an empty database, create a demo merchant and print its credentials; without --smtp-url, record e-mails as not sent (demo mode), for the dashboard to show under Settings → E-mails, instead of leaving them in the outbox (env KASSA_DEMO=1)")
	logLevel := fs.String("log-level", envOr("KASSA_LOG_LEVEL", "info"), "debug, info, warn or error (env KASSA_LOG_LEVEL)")
	poll := fs.Duration("revocation-poll", auth.DefaultRevocationPoll, "how often to load revocations made by other nodes or the CLI (at most 60s)")
	shutdown := fs.Duration("shutdown-timeout", 30*time.Second, "how long in-flight requests may take to finish at shutdown")
	simLatency := fs.Duration("simulator-latency", 0, "latency the built-in simulator adds to every processor call")
	holdDays := fs.Int("simulator-hold-days", 7, "days an authorization hold lasts in the simulator; a later capture is declined")
	procTimeout := fs.Duration("processor-timeout", payment.DefaultProcessorTimeout, "bound on one processor call")
	recovery := fs.Duration("recovery-interval", payment.DefaultRecoveryInterval, "how often to look for attempts abandoned by a crashed node")
	cpuProfile := fs.String("cpu-profile", "", "write a CPU profile of the whole run to this file (diagnostics)")
	allocProfile := fs.String("alloc-profile", "", "write the allocations of the whole run, by where they were made, to this file at exit (diagnostics)")
	smtpURL := fs.String("smtp-url", os.Getenv("KASSA_SMTP_URL"), "SMTP server for receipts, smtp://user:pass@host:port (env KASSA_SMTP_URL); without it receipts wait in the outbox")
	smtpFrom := fs.String("smtp-from", envOr("KASSA_SMTP_FROM", "receipts@localhost"), "From address of receipts (env KASSA_SMTP_FROM)")
	billingInterval := fs.Duration("billing-interval", billing.DefaultInterval, "how often the billing engine looks for due subscriptions and receipts")
	retrySchedule := fs.String("billing-retry-schedule", "24h,72h,120h", "when a declined cycle is retried, counted from its first decline")
	runBilling := fs.Bool("billing-engine", true, "run the billing engine on this node (false: an API-only node)")
	codeTTL := fs.Duration("auth-code-ttl", auth.DefaultCodeTTL, "lifetime of an authorization code of the partner flow (at most 10m)")
	backlog := fs.Int("billing-backlog-limit", billing.DefaultBacklogLimit, "past-due cycles of one subscription charged after downtime; older ones are recorded as missed")
	webhooksPrivate := fs.Bool("webhooks-allow-private", os.Getenv("KASSA_WEBHOOKS_ALLOW_PRIVATE") == "1", "let webhook deliveries reach loopback and private addresses, for development and tests (env KASSA_WEBHOOKS_ALLOW_PRIVATE=1); by default they are refused")
	webhooksCA := fs.String("webhooks-ca-file", os.Getenv("KASSA_WEBHOOKS_CA_FILE"), "trust the certificate authorities of this PEM file for webhook deliveries, beside the system's roots: receivers with certificates of a private CA (env KASSA_WEBHOOKS_CA_FILE)")
	trustedProxies := fs.String("trusted-proxies", "", "CIDR prefixes of the reverse proxies whose X-Forwarded-For names the client, comma-separated (default none)")
	metricsAddr := fs.String("metrics-addr", os.Getenv("KASSA_METRICS_ADDR"), "serve Prometheus metrics at http://ADDR/metrics, a listener apart from the API (env KASSA_METRICS_ADDR; default off)")
	tlsCert := fs.String("tls-cert", os.Getenv("KASSA_TLS_CERT"), "serve HTTPS (and HTTP/2) with this PEM certificate chain, reloaded with --tls-key on SIGHUP; needs --tls-key (env KASSA_TLS_CERT)")
	dbConnect := fs.Duration("db-connect-timeout", store.DefaultConnectTimeout, "PostgreSQL: bound on connecting to each host of --database-url, after which the next host is tried (unless the URL sets connect_timeout)")
	dbTCP := fs.Duration("db-tcp-timeout", store.DefaultTCPTimeout, "PostgreSQL: how long a connection whose server has gone silent stays open (TCP keepalive and TCP_USER_TIMEOUT)")
	dbWrite := fs.Duration("db-write-timeout", store.DefaultWriteTimeout, "PostgreSQL: bound on each write, from its admission to its commit; past it the request is answered 503 storage_unavailable, and readiness fails")
	dbRead := fs.Duration("db-read-timeout", store.DefaultReadTimeout, "PostgreSQL: bound on each read (a listing, an export, a lookup)")
	tlsKey := fs.String("tls-key", os.Getenv("KASSA_TLS_KEY"), "the PEM private key of --tls-cert (env KASSA_TLS_KEY)")
	return func(ctx context.Context, e *env) error {
		var level slog.Level
		if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
			return usagef("--log-level must be debug, info, warn or error")
		}
		if *poll <= 0 || *poll > time.Minute {
			return usagef("--revocation-poll must be between 1ns and 60s")
		}
		if *simLatency < 0 || *holdDays < 1 || *procTimeout <= 0 || *recovery <= 0 {
			return usagef("--simulator-latency must be >= 0, --simulator-hold-days >= 1, --processor-timeout and --recovery-interval > 0")
		}
		var retries []time.Duration
		for _, f := range strings.Split(*retrySchedule, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(f))
			if err != nil || d <= 0 {
				return usagef("--billing-retry-schedule must be durations separated by commas, e.g. 24h,72h,120h")
			}
			retries = append(retries, d)
		}
		if *codeTTL <= 0 || *codeTTL > auth.MaxCodeTTL {
			return usagef("--auth-code-ttl must be between 1ns and %v", auth.MaxCodeTTL)
		}
		if *dbConnect <= 0 || *dbTCP <= 0 || *dbWrite <= 0 || *dbRead <= 0 {
			return usagef("--db-connect-timeout, --db-tcp-timeout, --db-write-timeout and --db-read-timeout must be positive")
		}
		e.db.bounds = store.Bounds{ConnectTimeout: *dbConnect, TCPTimeout: *dbTCP, WriteTimeout: *dbWrite, ReadTimeout: *dbRead}
		if *billingInterval <= 0 || *backlog < 1 {
			return usagef("--billing-interval must be positive and --billing-backlog-limit at least 1")
		}
		proxies, err := httpapi.ParsePrefixes(*trustedProxies)
		if err != nil {
			return usagef("--trusted-proxies must be CIDR prefixes separated by commas, e.g. 10.0.0.0/8,fd00::/8")
		}
		// --tls-cert FILE --tls-key FILE serve HTTPS (HTTP/2) directly, reloading the pair on SIGHUP
		// without dropping connections.
		if (*tlsCert == "") != (*tlsKey == "") {
			return usagef("--tls-cert and --tls-key go together: both to serve HTTPS, neither to serve HTTP")
		}
		var pair *tlscert.Pair
		if *tlsCert != "" {
			if pair, err = tlscert.Load(*tlsCert, *tlsKey); err != nil {
				return err
			}
		}
		var webhookRoots *x509.CertPool
		if *webhooksCA != "" {
			b, err := os.ReadFile(*webhooksCA)
			if err == nil {
				webhookRoots, err = webhook.RootsWith(b)
			}
			if err != nil {
				return usagef("--webhooks-ca-file %s: %v", *webhooksCA, err)
			}
		}
		var mailer *billing.Mailer
		if *smtpURL != "" {
			var err error
			if mailer, err = billing.NewMailer(*smtpURL, *smtpFrom); err != nil {
				return usageError{err.Error()}
			}
		}
		if *publicURL != "" {
			if u, err := url.Parse(*publicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usagef("--public-url must be an absolute http or https URL")
			}
		}
		log := slog.New(httpapi.LogHandler(slog.NewJSONHandler(e.stderr, &slog.HandlerOptions{Level: level})))
		if *cpuProfile != "" {
			f, err := private.Create(*cpuProfile)
			if err != nil {
				return err
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return err
			}
			defer pprof.StopCPUProfile()
		}
		if *allocProfile != "" {
			defer func() {
				if err := writeAllocProfile(*allocProfile); err != nil {
					log.Error("write the allocation profile", "err", err)
				}
			}()
		}

		e.db.note = log.Warn
		kek, err := e.db.kek(log.Info)
		if err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		db, err := e.db.open(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		ln, err := net.Listen("tcp", *addr)
		if err != nil {
			return err
		}
		var set *metrics.Set
		var metricsURL string
		if *metricsAddr != "" {
			mln, err := net.Listen("tcp", *metricsAddr)
			if err != nil {
				ln.Close()
				return fmt.Errorf("--metrics-addr: %w", err)
			}
			set = metrics.New()
			stopMetrics := serveMetrics(mln, set.Handler(log))
			defer stopMetrics()
			metricsURL = "http://" + mln.Addr().String() + "/metrics"
		}
		scheme := "http://"
		if pair != nil {
			ln, scheme = tls.NewListener(ln, pair.Config()), "https://"
			pair.Log(log, "serving HTTPS")
		}
		defer onHangup(ctx, pair, log)()
		base := strings.TrimRight(*publicURL, "/")
		if base == "" {
			base = scheme + ln.Addr().String()
		}
		srv, err := server.New(ctx, server.Config{DB: db, Logger: log, RevocationPoll: *poll, ShutdownTimeout: *shutdown, KEK: kek,
			Simulator:        simulator.Config{Latency: *simLatency, HoldDays: *holdDays},
			ProcessorTimeout: *procTimeout, RecoveryInterval: *recovery,
			Billing: billing.Config{Interval: *billingInterval, RetrySchedule: retries, BacklogLimit: *backlog, Mailer: mailer, Demo: *demo && mailer == nil,
				Lease: 3 * *procTimeout}, NoBillingEngine: !*runBilling, CodeTTL: *codeTTL, PublicURL: base, TLS: pair != nil,
			TrustedProxies: proxies, Connectors: e.connectors(db, log), WebhooksAllowPrivate: *webhooksPrivate, WebhookRootCAs: webhookRoots, Metrics: set})
		if err != nil {
			ln.Close()
			return err
		}
		var banner strings.Builder
		if *demo {
			if err := demoMerchant(ctx, &banner, srv, base); err != nil {
				ln.Close()
				return err
			}
			if mailer == nil {
				fmt.Fprintf(&banner, "E-mails are not sent (demo mode, no --smtp-url): the dashboard shows them, with a preview, at\n  %s/dashboard/settings/emails\n\n", base)
			}
		}
		return srv.Serve(ctx, ln, func() {
			attrs := []any{"addr", ln.Addr().String(), "public_url", base, "database", db.String()}
			if metricsURL != "" {
				attrs = append(attrs, "metrics", metricsURL)
			}
			log.Info("listening", attrs...)
			fmt.Fprintf(e.stdout, "Kassa is listening on %s (%s)\n", base, db.String())
			if metricsURL != "" {
				fmt.Fprintf(e.stdout, "Prometheus metrics: %s\n", metricsURL)
			}
			fmt.Fprint(e.stdout, banner.String())
		})
	}
}

// onHangup reloads the TLS pair at each SIGHUP until ctx ends or stop is called, and logs the outcome:
// the certificate now served, or why the new files were refused and the previous pair kept. Without
// TLS there is nothing to reload and the signal is only logged, so that a reload (the systemd unit's
// ExecReload) never stops a server.
func onHangup(ctx context.Context, pair *tlscert.Pair, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if pair == nil {
					log.Info("SIGHUP: nothing to reload without --tls-cert")
				} else if err := pair.Reload(); err != nil {
					log.Error("TLS certificate not reloaded; the previous one is still served", "err", err)
				} else {
					pair.Log(log, "TLS certificate reloaded")
				}
			}
		}
	}()
	return func() { signal.Stop(hup); cancel() }
}

// demoEmail is the demo merchant's e-mail, and its dashboard owner's sign-in.
const demoEmail = "demo@example.com"

// demoMerchant creates a demo merchant when the database has none, and prints how to get a token; on
// a later start, how to get a new secret for it.
func demoMerchant(ctx context.Context, out io.Writer, srv *server.Server, base string) error {
	db := srv.DB()
	var n int
	err := db.Read(ctx, func(q store.Querier) error {
		var err error
		n, err = merchant.Count(ctx, q)
		return err
	})
	if err != nil {
		return err
	}
	if n > 0 {
		// A later start of make run prints the demo merchant's id and how to get a new secret: the
		// secret was shown once, at the first start.
		all, err := listMerchants(ctx, db)
		if err != nil {
			return err
		}
		for _, m := range all {
			if merchant.EmailKey(m.Email) == merchant.EmailKey(demoEmail) {
				fmt.Fprintf(out, `
The database already has its demo merchant, %s; its client secret was shown on its first start.
A new client id and secret:                 bin/kassa client create --merchant-id %s
A new link to set the dashboard password:   bin/kassa user reset-password --email %s

`, m.ID, m.ID, demoEmail)
				return nil
			}
		}
		fmt.Fprintf(out, "\nThe database already has merchants (bin/kassa merchant list), and no demo merchant: none was created.\n\n")
		return nil
	}
	m, err := createMerchant(ctx, db, merchant.New{Name: "Demo Shop", Email: demoEmail}, "", &linkFlags{publicURL: base}, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(out, `
A demo merchant was created. Its client secret is shown only this once:
  merchant_id    %s
  client_id      %s
  client_secret  %s

Get an access token:
  curl -s -u %s:%s -d grant_type=client_credentials %s/oauth/token

Sign in to the dashboard, %s/dashboard, as %s (its owner) once you have chosen a password
at this link, which works once, for 72 hours:
  %s

`, m.MerchantID, m.ClientID, m.ClientSecret, m.ClientID, m.ClientSecret, base, base, m.Email, m.Link)
	return nil
}

// serveMetrics serves the metrics exposition on ln, at /metrics, until the returned function is called.
// It is a listener of its own so that the API's address never exposes it, and its requests are not
// counted among the API's.
func serveMetrics(ln net.Listener, h http.Handler) (stop func()) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second}
	go hs.Serve(ln)
	return func() { hs.Close() }
}

// writeAllocProfile writes the allocations made so far, as "go tool pprof -sample_index=alloc_space"
// reads them.
func writeAllocProfile(name string) error {
	f, err := private.Create(name)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
