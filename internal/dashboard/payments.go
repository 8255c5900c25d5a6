package dashboard

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/hostedpage"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/payment"

	"golang.org/x/text/language"
)

// Payments: payment intents and hosted-page sessions, listed, and each in detail with its attempts
// and last error: the objects of the v1 payments API, read-only, for readers. Each list is
// newest first, paged, and filtered by status; each detail links the ledger transactions of its
// attempts to their pages.

// paymentsRoutes registers the payments pages.
func (h *Handler) paymentsRoutes(r *httpapi.Router) {
	r.Handle("GET", "/dashboard/payments/intents", h.requireRole(readers, h.intents))
	r.Handle("GET", "/dashboard/payments/intents/{intent}", h.requireRole(readers, h.intent))
	r.Handle("GET", "/dashboard/payments/sessions", h.requireRole(readers, h.checkoutSessions))
	r.Handle("GET", "/dashboard/payments/sessions/{session}", h.requireRole(readers, h.checkoutSession))
}

// paymentsList is what the intents and sessions lists show: the filter and a page of rows.
type paymentsList[T any] struct {
	Status   string
	Statuses []string
	Rows     []T
	Loc      *time.Location
	Now      time.Time
	Pager    pager
	Empty    *emptyState // in place of the table when there is no row; the intents list's only
}

// paymentsMerchant reads the signed-in user's merchant; without it, it has shown why.
func (h *Handler) paymentsMerchant(w http.ResponseWriter, r *http.Request) (merchant.Merchant, bool) {
	m, err := h.cfg.Merchants.Get(r.Context(), signedIn(r).MerchantID)
	if err != nil {
		h.fail(w, r, err)
	}
	return m, err == nil
}

// listRefused shows a list page with why its filter or page was refused.
func (h *Handler) listRefused(w http.ResponseWriter, r *http.Request, page, title string, data any, err error) bool {
	return h.answerRefusal(w, r, err, func(status int, msg string) {
		h.render(w, r, status, page, view{Title: title, Wide: true, Data: data, Error: msg})
	})
}

// intents lists the merchant's payment intents, newest first, all or those in one status.
func (h *Handler) intents(w http.ResponseWriter, r *http.Request) {
	m, ok := h.paymentsMerchant(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	c := cursorsOf(q)
	pg := paymentsList[checkout.Intent]{Status: q.Get("status"), Statuses: checkout.Statuses, Loc: m.Location()}
	var err error
	var more bool
	if pg.Status != "" && !slices.Contains(checkout.Statuses, pg.Status) {
		err = badStatus(checkout.Statuses)
	} else {
		pg.Rows, more, err = h.cfg.Checkout.List(r.Context(), checkout.Who{Merchant: m},
			checkout.ListParams{Limit: pageSize, StartingAfter: c.After, EndingBefore: c.Before, Status: pg.Status})
	}
	if h.listRefused(w, r, "intents", "Payment intents", pg, err) {
		return
	}
	if n := len(pg.Rows); n > 0 {
		pg.Pager = c.links(q, pg.Rows[0].IntentID, pg.Rows[n-1].IntentID, more)
	}
	switch manager := isManager(signedIn(r).Role); {
	case len(pg.Rows) == 0 && pg.Status != "":
		pg.Empty = noMatch("intents-empty", "No payment intent is "+pg.Status+".", "/dashboard/payments/intents")
	case len(pg.Rows) == 0:
		pg.Empty = &emptyState{ID: "intents-empty", Heading: "No payment intents yet",
			About:  "A payment intent is a payment your website or app takes through the payments API, from its amount to the money moved.",
			Action: actionIf(manager, link{"Create an API key", settingsPath + "#api-keys-heading"}),
			Also:   actionIf(manager, link{"read the API documentation", "/docs/api"})}
	}
	h.render(w, r, http.StatusOK, "intents", view{Title: "Payment intents", Wide: true, Data: pg})
}

// badStatus is the refusal of a status filter not among statuses.
func badStatus(statuses []string) error {
	return fault.Invalid("status", "Status must be one of %s.", strings.Join(statuses, ", "))
}

// intentPage is what a payment intent's page shows.
type intentPage struct {
	checkout.Intent
	Attempts []payment.Transaction // the ledger transactions of its money operations, oldest first
	Loc      *time.Location
	Lang     language.Tag // the merchant's locale, for the attempts' amounts
}

// intent shows one of the merchant's payment intents with the ledger transactions of its attempts.
func (h *Handler) intent(w http.ResponseWriter, r *http.Request) {
	m, ok := h.paymentsMerchant(w, r)
	if !ok {
		return
	}
	in, err := h.cfg.Checkout.Get(r.Context(), checkout.Who{Merchant: m}, r.PathValue("intent"))
	pg := intentPage{Intent: in, Loc: m.Location(), Lang: m.Language()}
	if err == nil {
		pg.Attempts, err = h.attempts(r.Context(), in)
	}
	if h.answerRefusal(w, r, err, func(status int, msg string) {
		h.notFoundOr(w, r, status, "No such payment intent", msg)
	}) {
		return
	}
	h.render(w, r, http.StatusOK, "intent", view{Title: "Payment intent " + in.IntentID, Wide: true, Data: pg})
}

// attempts reads the ledger transactions of an intent's money operations, oldest first.
func (h *Handler) attempts(ctx context.Context, in checkout.Intent) ([]payment.Transaction, error) {
	var out []payment.Transaction
	for _, key := range in.AttemptKeys() {
		t, ok, err := h.cfg.Ledger.ByKey(ctx, in.MerchantID, key)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// checkoutSessions lists the merchant's hosted-page sessions, newest first, all or those in one
// status (open, completed, canceled, expired).
func (h *Handler) checkoutSessions(w http.ResponseWriter, r *http.Request) {
	m, ok := h.paymentsMerchant(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	c := cursorsOf(q)
	pg := paymentsList[hostedpage.Session]{Status: q.Get("status"), Statuses: hostedpage.Statuses, Loc: m.Location(), Now: h.cfg.Now()}
	after, before, err := c.rowIDs()
	switch {
	case pg.Status != "" && !slices.Contains(hostedpage.Statuses, pg.Status):
		err = badStatus(hostedpage.Statuses)
	case err == nil:
		pg.Rows, err = h.cfg.HostedPages.List(r.Context(), m.ID, hostedpage.ListFilter{Status: pg.Status, After: after, Before: before, Limit: pageSize + 1})
	}
	if h.listRefused(w, r, "sessions", "Hosted-page sessions", pg, err) {
		return
	}
	var more bool
	pg.Rows, more = trimPage(pg.Rows, c)
	if n := len(pg.Rows); n > 0 {
		pg.Pager = c.links(q, strconv.FormatInt(pg.Rows[0].ID, 10), strconv.FormatInt(pg.Rows[n-1].ID, 10), more)
	}
	h.render(w, r, http.StatusOK, "sessions", view{Title: "Hosted-page sessions", Wide: true, Data: pg})
}

// sessionPage is what a hosted-page session's page shows: the session, its intent and the ledger
// transactions of the intent's attempts.
type sessionPage struct {
	hostedpage.Session
	Status   string
	Intent   checkout.Intent
	Tries    []pageTry
	Attempts []payment.Transaction
	Loc      *time.Location
	Lang     language.Tag // the merchant's locale, for the attempts' amounts
}

// pageTry is one try to pay on a session's page.
type pageTry struct {
	hostedpage.Attempt
	At time.Time
}

// checkoutSession shows one of the merchant's hosted-page sessions.
func (h *Handler) checkoutSession(w http.ResponseWriter, r *http.Request) {
	m, ok := h.paymentsMerchant(w, r)
	if !ok {
		return
	}
	ss, err := h.cfg.HostedPages.Get(r.Context(), m.ID, r.PathValue("session"))
	pg := sessionPage{Session: ss, Status: ss.Status(h.cfg.Now()), Loc: m.Location(), Lang: m.Language()}
	for _, a := range ss.Attempts {
		pg.Tries = append(pg.Tries, pageTry{Attempt: a, At: time.Unix(a.CreatedAt, 0)})
	}
	// A dashboard's card form that only stores a card (hostedpage.PurposeSaveCard) has no intent.
	if err == nil && ss.IntentID != "" {
		pg.Intent, err = h.cfg.Checkout.Get(r.Context(), checkout.Who{Merchant: m}, ss.IntentID)
		if err == nil {
			pg.Attempts, err = h.attempts(r.Context(), pg.Intent)
		}
	}
	if h.answerRefusal(w, r, err, func(status int, msg string) {
		h.notFoundOr(w, r, status, "No such session", msg)
	}) {
		return
	}
	h.render(w, r, http.StatusOK, "session", view{Title: "Hosted-page session " + ss.SessionID, Wide: true, Data: pg})
}
