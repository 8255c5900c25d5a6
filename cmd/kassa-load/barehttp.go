package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/field"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/payment"
)

// The HTTP-stack ceiling: a bare net/http handler, in the load tool, in a process of its own, that
// decodes the same sale request, checks the card number and writes a response of the same size,
// driven by the same client. "kassa-load bare-http" is that process, a subcommand left
// out of the help: the http-ceiling scenario starts it, drives it with the sale scenario's client
// code and clients, and stops it. What separates its requests per second from Kassa's sales per
// second is Kassa's own work: the token check, the velocity limits, the ledger's writes and the
// processor call; the HTTP server, the JSON decoding and encoding, the card check and the load
// generator are common to both, on the same cores.

// bareBearer is the one token the bare server issues and accepts. Its token endpoint is there only
// for the first call of the shared client (drive), before anything is measured.
const bareBearer = "bare-http-token"

// bareSaleBody has the fields of Kassa's sale request (payment.chargeBody with its customer fields),
// decoded by the same field.Value, so that the bare handler decodes what Kassa's does.
type bareSaleBody struct {
	Amount          field.Value `json:"amount"`
	Currency        field.Value `json:"currency"`
	CardNumber      field.Value `json:"card_number"`
	CardExpiryMonth field.Value `json:"card_expiry_month"`
	CardExpiryYear  field.Value `json:"card_expiry_year"`
	CVV2            field.Value `json:"cvv2"`
	Token           field.Value `json:"token"`
	TestMode        field.Value `json:"test_mode"`
	Email           field.Value `json:"email"`
	FirstName       field.Value `json:"first_name"`
	LastName        field.Value `json:"last_name"`
	Company         field.Value `json:"company"`
	Telephone       field.Value `json:"telephone"`
	Address1        field.Value `json:"address1"`
	Address2        field.Value `json:"address2"`
	City            field.Value `json:"city"`
	Province        field.Value `json:"province"`
	Country         field.Value `json:"country"`
	PostalCode      field.Value `json:"postal_code"`
	CustomID        field.Value `json:"custom_id"`
	InvoiceID       field.Value `json:"invoice_id"`
	OrderID         field.Value `json:"order_id"`
	Description     field.Value `json:"description"`
}

// bareHTTPMain runs "kassa-load bare-http": it listens on --addr, prints "bare-http is listening on
// http://ADDR", and serves the bare sale handler until SIGTERM or SIGINT. It returns the exit code.
func bareHTTPMain(args []string, out io.Writer) int {
	fs := flag.NewFlagSet("kassa-load bare-http", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on")
	size := fs.Int("response-bytes", 0, "bytes of every approved answer's body, padded with spaces up to it (default: unpadded)")
	fs.Parse(args)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kassa-load bare-http:", err)
		return 1
	}
	// The same server settings as kassa serve's (internal/server), so that only the handler differs.
	hs := &http.Server{
		Handler:           bareHandler(*size),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      90 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(shut)
	}()
	fmt.Fprintf(out, "bare-http is listening on http://%s\n", ln.Addr())
	if err := hs.Serve(ln); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "kassa-load bare-http:", err)
		return 1
	}
	return 0
}

// bareHandler serves POST /transaction-service/sale as a bare net/http handler: it reads the body as
// Kassa does (httpapi.DecodeJSON, at most 1 MiB) into bareSaleBody, checks the card number, its
// length for the brand and its Luhn digit, and the expiry (field.Card, Kassa's own check), and answers
// an approved sale (payment.Wire, Kassa's answer type, with Kassa's headers) whose body is padded
// with spaces, which JSON allows, to size bytes. A bad card is a 400, a missing token a 401.
// POST /oauth/token answers the one token it accepts.
func bareHandler(size int) http.Handler {
	var seq atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /oauth/token", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer"}`+"\n", bareBearer)
	})
	mux.HandleFunc("POST /transaction-service/sale", func(w http.ResponseWriter, r *http.Request) {
		n := seq.Add(1)
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Request-Id", "BAREHTTP-"+strconv.FormatInt(n, 10))
		if r.Header.Get("Authorization") != "Bearer "+bareBearer {
			http.Error(w, `{"error":"invalid_token"}`, http.StatusUnauthorized)
			return
		}
		var body bareSaleBody
		if err := httpapi.DecodeJSON(r, &body); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		pan, _, err := field.Card(body.CardNumber, body.CardExpiryMonth, body.CardExpiryYear)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		amount, _ := body.Amount.Str("amount")
		if _, err := strconv.ParseFloat(amount, 64); err != nil {
			http.Error(w, `{"error":"invalid_field","field":"amount"}`, http.StatusBadRequest)
			return
		}
		currency, _ := body.Currency.Str("currency")
		email, _ := body.Email.Str("email")
		b, err := json.Marshal(payment.Wire{ID: n, TransactionID: fmt.Sprintf("BARE%016d", n), Type: payment.KindSale,
			Result: payment.StatusApproved, Success: true, Message: "Approved", Time: time.Now().UnixMilli(),
			Amount: json.Number(amount), Currency: currency, CardType: string(card.BrandOf(pan)), CardSuffix: pan.Last4(),
			Captured: true, TestMode: true, Source: payment.SourceEcommerce, Email: email})
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		// Spaces before the line break make the body size bytes long, as httpapi.WriteJSON ends it.
		if pad := size - len(b) - 1; pad > 0 {
			b = append(b, make([]byte, pad)...)
			for i := len(b) - pad; i < len(b); i++ {
				b[i] = ' '
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(append(b, '\n'))
	})
	return mux
}

// startBareHTTP starts "self bare-http" (self: this program, the kassa-load binary) on a port of its
// choosing, answering approved sales of size bytes.
func startBareHTTP(ctx context.Context, self string, size int) (*kassa, error) {
	k := &kassa{bin: self}
	cmd := exec.Command(self, "bare-http", "--addr", "127.0.0.1:0", "--response-bytes", strconv.Itoa(size))
	if err := k.start(ctx, cmd, "bare-http is listening on ", "kassa-load bare-http"); err != nil {
		return nil, err
	}
	return k, nil
}

// saleAnswerBytes is the length of the body of an approved sale of m at k, the one the bare server
// matches: one sale made for it, as the sale scenario makes them.
func saleAnswerBytes(ctx context.Context, k *kassa, m merchant) (int, error) {
	cl := &client{base: k.url, id: m.ClientID, secret: m.ClientSecret, http: &http.Client{Timeout: 30 * time.Second}}
	tok, err := cl.do(ctx, "POST", "/oauth/token?grant_type=client_credentials", nil, true)
	if err != nil {
		return 0, err
	}
	var t struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(tok, &t); err != nil {
		return 0, err
	}
	cl.token = t.AccessToken
	b, err := cl.do(ctx, "POST", "/transaction-service/sale", saleBody, false)
	if err != nil {
		return 0, err
	}
	return len(b), nil
}
