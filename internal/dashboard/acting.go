package dashboard

import (
	"crypto/rand"
	"errors"
	"net/http"
	"regexp"
	"time"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/payment"
)

// clientOf is the client id the ledger records for what a dashboard user does ("dashboard/" + the
// user's id), so that a transaction shows who made it and the sales role lists its own
// (payment.Filter.ClientID). API clients' ids never contain a slash.
func clientOf(userID string) string { return "dashboard/" + userID }

// principalOf is the credential a dashboard user's payments count against in the velocity limits.
func principalOf(merchantID, userID string) httpapi.Principal {
	return httpapi.Principal{Account: "acct_" + merchantID, Credential: "user:" + userID}
}

// payer is who the ledger records for a money operation the signed-in user of r asks for.
func (h *Handler) payer(r *http.Request, m merchant.Merchant) payment.Actor {
	sess := signedIn(r)
	return payment.Actor{MerchantID: m.ID, ClientID: clientOf(sess.UserID), RequestID: httpapi.RequestID(r.Context()),
		Profile: m.SimulatorProfile, Location: m.Location(), Principal: principalOf(m.ID, sess.UserID), Velocity: m.Velocity}
}

// formKey is a new idempotency key for a form that moves money: the form carries it in a hidden
// field, so that a double submit or a reload of the same form sends the same key and the money
// moves once. Each rendering of the form gets a new one.
func formKey() string { return rand.Text() }

// ledgerKey is the ledger's idempotency key of a dashboard form's key: scoped to the user, and with a
// space, which an API client's Idempotency-Key may not contain, so no API request can take it.
func ledgerKey(userID, key string) string { return "dashboard " + userID + " " + key }

// formKeys are what a form's key may be: formKey's, or any as plain (letters and digits).
var formKeys = regexp.MustCompile(`^[A-Za-z0-9]{1,64}$`)

// expiredForm refuses a form without a key of formKey's making.
func expiredForm() error {
	return fault.Invalid("key", "This form has expired; check it and send it again.")
}

// once runs do, the change a form asks for, at most once per form: under the form's own key (its
// hidden field "key", formKey), in the signed-in user's idempotency records (idempotency.Store.Once),
// so that a double submit or a reload of the form finds what the first submission did — the page do
// sent the browser to — instead of doing it again; the records are the invoice API's, which keep an
// Idempotency-Key 24 hours. A submission that arrives while the first still runs waits for it, a few
// seconds at most. When do fails nothing is recorded: the same form may be corrected and sent again.
func (h *Handler) once(r *http.Request, do func() (string, error)) (string, error) {
	sess := signedIn(r)
	key := r.PostFormValue("key")
	if !formKeys.MatchString(key) {
		return "", expiredForm()
	}
	// What the form asks: its path and fields, whatever order the browser sent them in.
	request := []byte(r.URL.Path + "?" + r.PostForm.Encode())
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, _, err := h.cfg.Idempotency.Once(r.Context(), principalOf(sess.MerchantID, sess.UserID), "dashboard-"+key, request,
			func() ([]byte, error) {
				path, err := do()
				return []byte(path), err
			})
		var f *fault.Error
		if !errors.As(err, &f) || f.Code != "idempotency_key_in_use" {
			return string(out), err
		}
		if time.Now().After(deadline) {
			return "", fault.Busy(f.Code, "This form is still being processed. Reload the page in a moment to see what it did.")
		}
		select {
		case <-r.Context().Done():
			return "", r.Context().Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
