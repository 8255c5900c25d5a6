package main

import (
	"context"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/webhook"
)

// "kassa-load webhooks" is the webhooks' benchmark. For each backend it starts
// "kassa serve --webhooks-allow-private" with a local HTTPS receiver inside this process, which
// answers 200 and verifies nothing, and reports:
//
//   - the sale scenario's throughput without an endpoint, then with one subscribed to every event ("*"),
//     and the ratio (the target: at least 90 %); and how many deliveries a run with the endpoint left
//     behind and how long they took after it: a node busy with payments paces its deliveries
//     (webhook.BusyRate), and they catch up once it is not.
//   - delivery throughput: --events events recorded with event.Record straight into the database, in
//     transactions of 500, to that endpoint, and the time from the first commit until the last of them
//     is delivered (the target: at least 1,000 deliveries/s).
//
// Usage:
//
//	kassa-load webhooks [--kassa bin/kassa] [--backends sqlite,postgres] [--clients 64] [--duration 10s] [--events 20000]
func webhooksMain(args []string, out io.Writer) int {
	fs := flag.NewFlagSet("kassa-load webhooks", flag.ExitOnError)
	var c config
	var backends string
	events := fs.Int("events", 20000, "events whose delivery is timed")
	fs.StringVar(&c.kassa, "kassa", "bin/kassa", "the kassa binary to start")
	fs.StringVar(&backends, "backends", "sqlite,postgres", "storage backends to measure, comma-separated")
	fs.IntVar(&c.clients, "clients", 64, "concurrent clients of the sale scenario")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long each sale run is measured")
	fs.DurationVar(&c.warmup, "warmup", 2*time.Second, "how long each sale run goes before it is measured")
	fs.IntVar(&c.rounds, "rounds", 4, "how many pairs of sales runs without and with the endpoint, in the order without, with, with, without…; the ratio is of the means")
	fs.Parse(args)
	c.backends = split(backends)
	ctx := context.Background()
	ok := true
	for _, backend := range c.backends {
		r, err := benchWebhooks(ctx, c, backend, *events)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kassa-load webhooks: %s: %v\n", backend, err)
			return 1
		}
		ratio := r.salesWith / r.salesWithout
		fmt.Fprintf(out, "%s webhooks: sales %.0f/s without an endpoint, %.0f/s with one subscribed to * (%.1f %%, target ≥ 90 %%), "+
			"leaving at most %d deliveries behind, delivered within %.1f s; %d deliveries in %.2f s: %.0f deliveries/s (target ≥ 1,000)\n",
			backend, r.salesWithout, r.salesWith, 100*ratio, r.backlog, r.drain.Seconds(), *events, r.deliveryTime.Seconds(),
			float64(*events)/r.deliveryTime.Seconds())
		drains := make([]float64, len(r.drains))
		for i, d := range r.drains {
			drains[i] = d.Seconds()
		}
		fmt.Fprintf(out, "%s webhooks: each run's sales/s without an endpoint %s, with it %s (what it left behind delivered within %s s)\n",
			backend, rates(r.runsWithout, 0), rates(r.runsWith, 0), rates(drains, 1))
		ok = ok && ratio >= 0.9 && float64(*events)/r.deliveryTime.Seconds() >= 1000
	}
	if !ok {
		fmt.Fprintln(out, "kassa-load webhooks: a target was missed")
		return 1
	}
	return 0
}

type webhooksResult struct {
	salesWithout, salesWith float64
	// Each run's sales/s, in the order they ran within each kind: how far runs of one kind differ;
	// and how long each run's deliveries left behind took after it.
	runsWithout, runsWith []float64
	drains                []time.Duration
	deliveryTime          time.Duration
	// The most deliveries a run with the endpoint left pending at its end (a busy node sends few:
	// payments first), and the longest they took to be delivered after it.
	backlog int
	drain   time.Duration
}

func benchWebhooks(ctx context.Context, c config, backend string, events int) (webhooksResult, error) {
	var r webhooksResult
	env, err := newEnvironment(backend)
	if err != nil {
		return r, err
	}
	defer env.close()
	var received atomic.Int64
	rc := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { received.Add(1) }))
	defer rc.Close()
	roots := filepath.Join(env.dir, "receiver.pem")
	if err := os.WriteFile(roots, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rc.Certificate().Raw}), 0o600); err != nil {
		return r, err
	}
	// kassa serve inherits both: the key-encryption key this process seals the endpoint's secret under,
	// and the receiver's certificate as the only one it trusts.
	kekText := envelope.NewKEKText()
	os.Setenv("KASSA_VAULT_KEY", kekText)
	os.Setenv("SSL_CERT_FILE", roots)
	srv, err := startKassa(ctx, c.kassa, env.dbArgs("api"), []string{"--webhooks-allow-private"})
	if err != nil {
		return r, err
	}
	defer srv.stop()
	m, err := srv.newMerchant(ctx, "hooks")
	if err != nil {
		return r, err
	}
	sale := func() (float64, error) {
		res, err := drive(ctx, srv, m, scenarios["sale"], c, nil)
		if err != nil {
			return 0, err
		}
		return res.rate("sale"), nil
	}
	db, err := store.Open(ctx, store.Config{DataDir: flagAfter(env.dbArgs("api"), "--data-dir"), DatabaseURL: flagAfter(env.dbArgs("api"), "--database-url")})
	if err != nil {
		return r, err
	}
	defer db.Close()
	kek, err := envelope.ParseKEK(kekText)
	if err != nil {
		return r, err
	}
	ring, err := envelope.NewKeyring(ctx, db, kek, time.Now)
	if err != nil {
		return r, err
	}
	// The endpoint is disabled for the runs without it (a disabled endpoint is queued nothing) and
	// enabled for those with it, on one server, in the order without, with, with, without, without,
	// with…: the database grows from run to run, and sales slow down with it, so that runs alternating
	// one for one put every run with the endpoint on the larger database (two runs of the same kind in
	// that order differed by 14 %); in this order a steady drift weighs the same on both sides, and the
	// ratio is of the means.
	endpoints := webhook.NewEndpoints(webhook.EndpointsConfig{DB: db, Keyring: ring, AllowPrivate: true})
	off := true
	ep, _, err := endpoints.Create(ctx, m.ID, webhook.EndpointBody{URL: &rc.URL, EnabledEvents: &[]string{"*"}, Disabled: &off}, webhook.Actor{})
	if err != nil {
		return r, err
	}
	var without, with []float64
	for round := range max(c.rounds, 1) {
		for _, on := range []bool{round%2 == 1, round%2 == 0} {
			disabled := !on
			if _, err := endpoints.Update(ctx, m.ID, ep.EndpointID, webhook.EndpointBody{Disabled: &disabled}, webhook.Actor{}); err != nil {
				return r, err
			}
			rate, err := sale()
			if err != nil {
				return r, err
			}
			if on {
				with = append(with, rate)
				// The next run without the endpoint does not pay for this one's deliveries.
				n, err := deliveriesPending(ctx, db)
				if err != nil {
					return r, err
				}
				begin := time.Now()
				if err := waitDelivered(ctx, db, 10*time.Minute); err != nil {
					return r, err
				}
				r.backlog, r.drain = max(r.backlog, n), max(r.drain, time.Since(begin))
				r.drains = append(r.drains, time.Since(begin))
			} else {
				without = append(without, rate)
			}
			// Nor does any run pay for the cleaning up after the one before: the sales' and the
			// deliveries' churn, vacuumed or checkpointed by the next run's time otherwise.
			if err := env.settle(ctx, db); err != nil {
				return r, err
			}
		}
	}
	r.salesWithout, r.salesWith = mean(without), mean(with)
	r.runsWithout, r.runsWith = without, with
	on := false
	if _, err := endpoints.Update(ctx, m.ID, ep.EndpointID, webhook.EndpointBody{Disabled: &on}, webhook.Actor{}); err != nil {
		return r, err
	}
	// Whatever the sales queued is delivered first, so that the timed deliveries start from none.
	if err := waitDelivered(ctx, db, 10*time.Minute); err != nil {
		return r, err
	}
	start := time.Now()
	for done := 0; done < events; {
		n := min(500, events-done)
		if err := db.Write(ctx, func(tx *store.Tx) error {
			for range n {
				if err := event.Record(ctx, tx, m.ID, event.CustomerCreated, map[string]string{"id": "cus_bench", "email": "bench@example.com"}, time.Now()); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return r, err
		}
		done += n
	}
	if err := waitDelivered(ctx, db, 10*time.Minute); err != nil {
		return r, err
	}
	r.deliveryTime = time.Since(start)
	return r, nil
}

// rates is rs written with prec decimals, separated by commas.
func rates(rs []float64, prec int) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = strconv.FormatFloat(r, 'f', prec, 64)
	}
	return strings.Join(out, ", ")
}

func mean(rs []float64) float64 {
	var sum float64
	for _, r := range rs {
		sum += r
	}
	return sum / float64(len(rs))
}

// deliveriesPending counts the deliveries not yet made, and the events queued for the endpoint.
func deliveriesPending(ctx context.Context, db *store.DB) (int, error) {
	return webhook.Backlog(ctx, db)
}

// waitDelivered waits until no delivery is pending.
func waitDelivered(ctx context.Context, db *store.DB, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		n, err := deliveriesPending(ctx, db)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d deliveries still pending after %v", n, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// flagAfter is the value given to flag name in args, or "".
func flagAfter(args []string, name string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == name {
			return args[i+1]
		}
	}
	return ""
}
