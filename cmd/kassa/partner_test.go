package main_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/kassapay/kassa/internal/signin/signintest"
)

// kassa partner create registers a partner whose client runs the authorization-code flow against a
// running server; kassa merchant revoke-partner, run while it serves, ends that partner's access to
// that merchant: its access and refresh tokens stop working.
func TestPartnerCommandsWhileServing(t *testing.T) {
	t.Parallel()
	db := dbArgs(t, "sqlite")
	srv := startServer(t, nil, db...)
	m := cliJSON(t, append([]string{"merchant", "create", "--init", "--name", "Maple Goods", "--email", "ops@maple.example", "--password", "a long passphrase"}, db...)...)
	p := cliJSON(t, append([]string{"partner", "create", "--name", "Business", "--image-url", "https://partner.example/logo.png",
		"--callback-uri", "https://partner.example/callback", "--callback-uri", "http://localhost:9/callback", "--token-validity", "10m"}, db...)...)
	id, _ := p["partner_id"].(string)
	if !regexp.MustCompile(`^[0-9a-f]{10}$`).MatchString(id) || p["account_id"] != "acct_"+id || !hex32.MatchString(p["client_id"].(string)) ||
		!hex32.MatchString(p["client_secret"].(string)) || len(p) != 4 {
		t.Fatalf("partner create printed %v", p)
	}

	cfg := oauth2.Config{ClientID: p["client_id"].(string), ClientSecret: p["client_secret"].(string), RedirectURL: "https://partner.example/callback",
		Endpoint: oauth2.Endpoint{AuthURL: srv.url + "/oauth/authorize", TokenURL: srv.url + "/oauth/token"}}
	code := signintest.Approve(t, srv.url, cfg.AuthCodeURL("st"), "ops@maple.example", "a long passphrase")
	tok, err := cfg.Exchange(context.Background(), code)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Extra("merchant_id") != m["merchant_id"] || tok.Extra("expires_in") != float64(600) {
		t.Fatalf("token %+v", tok)
	}
	list := func() int {
		resp, _ := getJSON(t, "GET", srv.url+"/transaction-service/transaction", nil, map[string]string{"Authorization": "Bearer " + tok.AccessToken})
		return resp.StatusCode
	}
	if s := list(); s != 200 {
		t.Fatalf("the partner's token: %d", s)
	}
	r := cliJSON(t, append([]string{"merchant", "revoke-partner", "--merchant-id", m["merchant_id"].(string), "--partner-id", id}, db...)...)
	if r["grants_revoked"] != float64(1) || r["partner_id"] != id {
		t.Fatalf("revoke-partner printed %v", r)
	}
	revokedAt := time.Now()
	for list() != 401 {
		if time.Since(revokedAt) > 60*time.Second {
			t.Fatal("the partner's token still works 60 s after revoke-partner")
		}
		time.Sleep(100 * time.Millisecond)
	}
	tok.Expiry = time.Now().Add(-time.Second)
	if _, err := cfg.TokenSource(context.Background(), tok).Token(); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("refresh after revoke-partner: %v", err)
	}
}
