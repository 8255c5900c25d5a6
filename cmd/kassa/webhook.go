package main

import (
	"context"
	"errors"
	"flag"
	"net/http"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/webhook"
)

// The operator's commands of webhook endpoints (kassa webhook create, list and delete), through the
// same store, and rules, as the v1 API and the dashboard.

// webhookEndpoints opens the database and the endpoint store. Creating seals a secret, so it needs the
// key-encryption key, checked first as cardKeys does; listing and deleting do not. An unknown
// merchant is an error.
func webhookEndpoints(ctx context.Context, e *env, merchantID string, sealing, allowPrivate bool) (*webhook.Endpoints, func(), error) {
	var kek *envelope.KEK
	if sealing {
		var err error
		if kek, err = e.db.kek(e.note); err != nil {
			return nil, nil, err
		}
	}
	db, err := e.db.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*webhook.Endpoints, func(), error) { db.Close(); return nil, nil, err }
	if err := db.Read(ctx, func(q store.Querier) error { _, err := merchant.Get(ctx, q, merchantID); return err }); err != nil {
		if errors.Is(err, merchant.ErrNotFound) {
			err = errors.New("no merchant with id " + merchantID)
		}
		return fail(err)
	}
	cfg := webhook.EndpointsConfig{DB: db, AllowPrivate: allowPrivate}
	if sealing {
		if cfg.Keyring, err = envelope.NewKeyring(ctx, db, kek, time.Now); err != nil {
			return fail(err)
		}
	}
	return webhook.NewEndpoints(cfg), func() { db.Close() }, nil
}

// webhookFlags name the flag of each field of an endpoint, for a refusal.
var webhookFlags = map[string]string{"url": "url", "enabled_events": "events", "description": "description"}

// webhookRefusal is a refused field as the flag that set it: a usage error.
func webhookRefusal(err error) error {
	var f *fault.Error
	if errors.As(err, &f) && f.Status == http.StatusBadRequest && webhookFlags[f.Field] != "" {
		return usagef("--%s: %s", webhookFlags[f.Field], f.Message)
	}
	if errors.As(err, &f) {
		return errors.New(f.Message)
	}
	return err
}

func webhookCreateCommand(fs *flag.FlagSet) func(context.Context, *env) error {
	var merchantID, url, events, description string
	var allowPrivate bool
	fs.StringVar(&merchantID, "merchant-id", "", "the merchant whose endpoint it is (required)")
	fs.StringVar(&url, "url", "", "the https URL that receives the events (required)")
	fs.StringVar(&events, "events", webhook.AllEvents, "comma-separated event types, or * for every one")
	fs.StringVar(&description, "description", "", "what the endpoint is for")
	fs.BoolVar(&allowPrivate, "webhooks-allow-private", false, "accept an http:// URL, as kassa serve --webhooks-allow-private does (development)")
	return func(ctx context.Context, e *env) error {
		if err := required([2]string{"merchant-id", merchantID}, [2]string{"url", url}); err != nil {
			return err
		}
		list := strings.Split(events, ",")
		for i := range list {
			list[i] = strings.TrimSpace(list[i])
		}
		es, done, err := webhookEndpoints(ctx, e, merchantID, true, allowPrivate)
		if err != nil {
			return err
		}
		defer done()
		ep, secret, err := es.Create(ctx, merchantID, webhook.EndpointBody{URL: &url, EnabledEvents: &list, Description: &description}, webhook.Actor{})
		if err != nil {
			return webhookRefusal(err)
		}
		out := ep.Wire()
		out.Secret = secret
		return printJSON(e.stdout, out)
	}
}

// webhookList is what "kassa webhook list" prints: the merchant and its endpoints, never a secret.
type webhookList struct {
	MerchantID string                 `json:"merchant_id"`
	Endpoints  []webhook.WireEndpoint `json:"webhook_endpoints"`
}

func webhookListCommand(fs *flag.FlagSet) func(context.Context, *env) error {
	var merchantID string
	fs.StringVar(&merchantID, "merchant-id", "", "the merchant whose endpoints to list (required)")
	return func(ctx context.Context, e *env) error {
		if err := required([2]string{"merchant-id", merchantID}); err != nil {
			return err
		}
		es, done, err := webhookEndpoints(ctx, e, merchantID, false, false)
		if err != nil {
			return err
		}
		defer done()
		eps, err := es.List(ctx, merchantID)
		if err != nil {
			return err
		}
		out := webhookList{MerchantID: merchantID, Endpoints: []webhook.WireEndpoint{}}
		for _, ep := range eps {
			out.Endpoints = append(out.Endpoints, ep.Wire())
		}
		return printJSON(e.stdout, out)
	}
}

func webhookDeleteCommand(fs *flag.FlagSet) func(context.Context, *env) error {
	var merchantID, id string
	fs.StringVar(&merchantID, "merchant-id", "", "the merchant whose endpoint it is (required)")
	fs.StringVar(&id, "id", "", "the endpoint to delete: we_… (required)")
	return func(ctx context.Context, e *env) error {
		if err := required([2]string{"merchant-id", merchantID}, [2]string{"id", id}); err != nil {
			return err
		}
		es, done, err := webhookEndpoints(ctx, e, merchantID, false, false)
		if err != nil {
			return err
		}
		defer done()
		if _, err := es.Delete(ctx, merchantID, id, webhook.Actor{}); err != nil {
			return webhookRefusal(err)
		}
		return printJSON(e.stdout, map[string]any{"id": id, "object": "webhook_endpoint", "deleted": true})
	}
}
