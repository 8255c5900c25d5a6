package client_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/kassapay/kassa/client"
)

// TestBearerToken calls the gateway API with a token fetched beforehand, as a partner's application
// holds one; a token Kassa does not know is a 401 sent once.
func TestBearerToken(t *testing.T) {
	t.Parallel()
	server := os.Getenv("KASSA_URL")
	cfg := clientcredentials.Config{ClientID: os.Getenv("KASSA_CLIENT_ID"), ClientSecret: os.Getenv("KASSA_CLIENT_SECRET"), TokenURL: server + "/oauth/token"}
	tok, err := cfg.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	kassa, err := client.New(server, client.BearerToken(tok.AccessToken))
	if err != nil {
		t.Fatal(err)
	}
	list, err := kassa.ListTransactionsWithResponse(context.Background(), nil)
	if err != nil || list.JSON200 == nil {
		t.Fatalf("list: %v %s", err, list.Body)
	}

	rec := newRecorder()
	stranger := newClient(t, server, client.BearerToken("kat_unknown"), fast, rec)
	list, err = stranger.ListTransactionsWithResponse(context.Background(), nil)
	if err != nil || list.JSON401 == nil {
		t.Fatalf("an unknown token: %v %s, want a 401", err, list.Body)
	}
	if n := len(rec.to("/transaction-service/transaction")); n != 1 {
		t.Errorf("the 401 came after %d attempts, want 1", n)
	}
}

// TestClientCredentials: the client fetches one token and uses it for every call; a wrong secret is
// Kassa's invalid_client, asked once and not retried.
func TestClientCredentials(t *testing.T) {
	t.Parallel()
	server := os.Getenv("KASSA_URL")
	rec := newRecorder()
	kassa := newClient(t, server, merchantAuth(), fast, rec)
	for range 3 {
		if list, err := kassa.ListTransactionsWithResponse(context.Background(), nil); err != nil || list.JSON200 == nil {
			t.Fatalf("list: %v %s", err, list.Body)
		}
	}
	if n := len(rec.to("/oauth/token")); n != 1 {
		t.Errorf("%d token requests for 3 calls, want 1", n)
	}

	rec = newRecorder()
	wrong := newClient(t, server, client.ClientCredentials(os.Getenv("KASSA_CLIENT_ID"), "not-the-secret"), fast, rec)
	_, err := wrong.ListTransactionsWithResponse(context.Background(), nil)
	var refused *oauth2.RetrieveError
	if !errors.As(err, &refused) || refused.ErrorCode != "invalid_client" {
		t.Fatalf("a wrong secret: %v, want invalid_client", err)
	}
	if n := len(rec.to("/oauth/token")); n != 1 {
		t.Errorf("%d token requests, want 1", n)
	}
	if strings.Contains(err.Error(), "not-the-secret") {
		t.Errorf("the error shows the secret: %v", err)
	}
}

// TestAPIKey: the payments API v1 takes the key and the account it acts for; a key Kassa does not
// know is a 401, an account the key may not act for a 403, each sent once.
func TestAPIKey(t *testing.T) {
	t.Parallel()
	server := os.Getenv("KASSA_URL")
	key, account := os.Getenv("KASSA_API_KEY"), os.Getenv("KASSA_ACCOUNT")
	other, err := newMerchant("Other Shop", "other@example.com")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name         string
		key, account string
		status       int
	}{
		{"its own account", key, account, http.StatusOK},
		{"an unknown key", "kk_UNKNOWNUNKNOWNUNKNOWNUNKN", account, http.StatusUnauthorized},
		{"another merchant's account", key, other["account_id"], http.StatusForbidden},
	} {
		rec := newRecorder()
		kassa := newClient(t, server, client.APIKey(c.key, c.account), fast, rec)
		list, err := kassa.ListPaymentIntentsWithResponse(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if list.StatusCode() != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, list.StatusCode(), list.Body, c.status)
		}
		if n := len(rec.to("/v1/payment-intents")); n != 1 {
			t.Errorf("%s: %d attempts, want 1", c.name, n)
		}
	}
}
