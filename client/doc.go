// Package client is a Go client of Kassa's HTTP APIs: the gateway API (tokens, transactions, the
// customer vault, plans) and the payments API v1 (payment methods, payment intents, hosted-page
// sessions, webhook endpoints, events).
//
// The types and methods in kassa.gen.go are generated from api/openapi.yaml by oapi-codegen, as
// cfg.yaml and overlay.yaml configure it (make generate, or go generate in client/); a test fails
// when they are stale.
// The rest is written by hand: New, the three ways to authenticate (ClientCredentials, BearerToken,
// APIKey), and retries that carry one Idempotency-Key per call (Retry).
package client

//go:generate go tool oapi-codegen -config cfg.yaml ../api/openapi.yaml
