package dashboard

import (
	"crypto/rand"
	"net/http"

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
// moves once (issue 17, point 2). Each rendering of the form gets a new one.
func formKey() string { return rand.Text() }

// ledgerKey is the ledger's idempotency key of a dashboard form's key: scoped to the user, and with a
// space, which an API client's Idempotency-Key may not contain, so no API request can take it.
func ledgerKey(userID, key string) string { return "dashboard " + userID + " " + key }
