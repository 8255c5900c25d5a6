package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// TestMain lets the test binary stand in for kassa-load as the bare server of the http-ceiling
// scenario, which starts this program (os.Executable) with "bare-http", as main does.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "bare-http" {
		os.Exit(bareHTTPMain(os.Args[2:], os.Stdout))
	}
	os.Exit(m.Run())
}

// The bare handler answers the sale scenario's request as Kassa does, in as many bytes as asked for,
// through the load generator's own client; and it does check the card and the token.
func TestBareHandlerAnswersLikeASale(t *testing.T) {
	const size = 400 // more than its answer's natural length, which it pads
	srv := httptest.NewServer(bareHandler(size))
	defer srv.Close()
	c := &client{base: srv.URL, token: bareBearer, http: srv.Client()}
	if _, _, err := c.transaction(context.Background(), "/transaction-service/sale", saleBody, "APPROVED"); err != nil {
		t.Fatalf("the shared client's sale: %v", err)
	}
	b, err := c.do(context.Background(), "POST", "/transaction-service/sale", saleBody, false)
	if err != nil {
		t.Fatal(err)
	}
	var w struct {
		ID         int64       `json:"id"`
		Result     string      `json:"transaction_result"`
		CardType   string      `json:"card_type"`
		CardSuffix string      `json:"card_suffix"`
		Amount     json.Number `json:"amount"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatalf("answer %q: %v", b, err)
	}
	if len(b) != size || b[len(b)-1] != '\n' || w.ID != 2 || w.Result != "APPROVED" || w.CardType != "VISA" || w.CardSuffix != "4242" || w.Amount != "10.00" {
		t.Errorf("answer of %d bytes, want %d ending in a line break: %+v", len(b), size, w)
	}
	luhn := bytes.Replace(saleBody, []byte("4242424242424242"), []byte("4242424242424241"), 1)
	if _, err := c.do(context.Background(), "POST", "/transaction-service/sale", luhn, false); err == nil || !strings.Contains(err.Error(), ": 400 ") {
		t.Errorf("a card failing the Luhn check: %v, want a 400", err)
	}
	short := bytes.Replace(saleBody, []byte("4242424242424242"), []byte("424242424242424"), 1)
	if _, err := c.do(context.Background(), "POST", "/transaction-service/sale", short, false); err == nil || !strings.Contains(err.Error(), ": 400 ") {
		t.Errorf("15 digits of a Visa card: %v, want a 400", err)
	}
	c.token = "other"
	if _, err := c.do(context.Background(), "POST", "/transaction-service/sale", saleBody, false); err == nil || !strings.Contains(err.Error(), ": 401 ") {
		t.Errorf("another token: %v, want a 401", err)
	}
}
