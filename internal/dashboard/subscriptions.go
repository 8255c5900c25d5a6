package dashboard

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/field"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/plan"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/vault"
)

// Billing → Subscriptions: the list by status (ACTIVE, RETRY, SUSPENDED, PAUSED, CANCELED, EXPIRED)
// with next billing date and failures; a subscription's page with every billed cycle and its
// transaction; pause, resume, cancel, change the amount, and "retry now" for RETRY or SUSPENDED
// (through the billing engine, exactly once). Readers see; managers act. Pause, resume, cancel and
// the amount go through the vault's subscription rules (vault.Service.ChangeSubscription),
// the retry through the billing engine (billing.Engine.RetryNow). Each action is a form behind a
// confirmation that needs no script (a disclosure holding the confirming button).

// billingRoutes registers the plans and subscriptions pages.
func (h *Handler) billingRoutes(r *httpapi.Router) {
	r.Handle("GET", "/dashboard/plans", h.requireRole(readers, h.plans))
	r.Handle("GET", "/dashboard/plans/new", h.requireRole(managers, h.newPlan))
	r.Handle("POST", "/dashboard/plans/new", h.requireRole(managers, h.createPlan))
	r.Handle("GET", "/dashboard/plans/{plan}", h.requireRole(readers, h.showPlan))
	r.Handle("POST", "/dashboard/plans/{plan}", h.requireRole(managers, h.updatePlan))
	r.Handle("POST", "/dashboard/plans/{plan}/delete", h.requireRole(managers, h.deletePlan))
	r.Handle("GET", "/dashboard/subscriptions", h.requireRole(readers, h.subscriptions))
	const one = "/dashboard/subscriptions/{customer}/{subscription}"
	r.Handle("GET", one, h.requireRole(readers, h.subscription))
	for action, status := range map[string]string{"pause": plan.StatusPaused, "resume": plan.StatusActive, "cancel": plan.StatusCanceled} {
		r.Handle("POST", one+"/"+action, h.requireRole(managers, h.setStatus(status)))
	}
	r.Handle("POST", one+"/amount", h.requireRole(managers, h.changeAmount))
	r.Handle("POST", one+"/retry", h.requireRole(managers, h.retryNow))
}

// subscriptionStatuses are the statuses the list filters by, in the order of a subscription's life.
// They are the six the vault has (plan.Status*).
var subscriptionStatuses = []string{plan.StatusActive, plan.StatusRetry, plan.StatusSuspended, plan.StatusPaused,
	plan.StatusCanceled, plan.StatusExpired}

// subscriptionsPage is what the subscriptions list shows.
type subscriptionsPage struct {
	Status   string
	Statuses []string
	Rows     []vault.SubscriptionRow
	Loc      *time.Location
	Pager    pager
	Empty    *emptyState // in place of the table when there is no row
}

// subscriptions lists the merchant's subscriptions, newest first, all or those in one status.
func (h *Handler) subscriptions(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	q := r.URL.Query()
	c := cursorsOf(q)
	pg := subscriptionsPage{Status: q.Get("status"), Statuses: subscriptionStatuses}
	m, err := h.cfg.Merchants.Get(r.Context(), sess.MerchantID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	pg.Loc = m.Location()
	after, before, err := c.rowIDs()
	switch {
	case pg.Status != "" && !slices.Contains(subscriptionStatuses, pg.Status):
		err = badStatus(subscriptionStatuses)
	case err == nil:
		err = h.cfg.DB.Read(r.Context(), func(q store.Querier) error {
			var err error
			pg.Rows, err = vault.ListSubscriptions(r.Context(), q, sess.MerchantID,
				vault.SubscriptionFilter{Status: pg.Status, After: after, Before: before, Limit: pageSize + 1})
			return err
		})
	}
	if h.listRefused(w, r, "subscriptions", "Subscriptions", pg, err) {
		return
	}
	var more bool
	pg.Rows, more = trimPage(pg.Rows, c)
	if n := len(pg.Rows); n > 0 {
		pg.Pager = c.links(q, strconv.FormatInt(pg.Rows[0].ID, 10), strconv.FormatInt(pg.Rows[n-1].ID, 10), more)
	}
	switch {
	case len(pg.Rows) == 0 && pg.Status != "":
		pg.Empty = noMatch("subscriptions-empty", "No subscription is "+pg.Status+".", "/dashboard/subscriptions")
	case len(pg.Rows) == 0:
		pg.Empty = &emptyState{ID: "subscriptions-empty", Heading: "No subscriptions yet",
			About:  "A subscription bills a customer’s stored card on a plan’s schedule; your website subscribes customers to plans through the gateway API.",
			Action: actionIf(isManager(sess.Role), link{"Create a plan", "/dashboard/plans/new"}),
			Also:   actionIf(isManager(sess.Role), link{"read the API documentation", "/docs/api"})}
	}
	h.render(w, r, http.StatusOK, "subscriptions", view{Title: "Subscriptions", Wide: true, Data: pg})
}

// subscriptionPage is what a subscription's page shows.
type subscriptionPage struct {
	vault.SubscriptionRow
	Loc                                  *time.Location
	Charges                              []chargeRow
	Retry                                billing.Retry
	CanEdit                              bool
	CanPause, CanResume, CanRetry, Final bool
	AmountField                          string // the amount field's value
	AmountError                          string // why the amount was refused
}

// chargeRow is one charge of the subscription's history, with the date its cycle fell due.
type chargeRow struct {
	billing.Charge
	Due time.Time
}

// subscription shows one of the merchant's subscriptions and its billed cycles.
func (h *Handler) subscription(w http.ResponseWriter, r *http.Request) {
	h.renderSubscription(w, r, http.StatusOK, view{}, "")
}

// renderSubscription shows the subscription of the request's path, with v's message; amountError is
// why the amount field's value, shown again, was refused ("" to show the subscription's amount).
func (h *Handler) renderSubscription(w http.ResponseWriter, r *http.Request, status int, v view, amountError string) {
	sess := signedIn(r)
	var pg subscriptionPage
	var rows []vault.SubscriptionRow
	m, err := h.cfg.Merchants.Get(r.Context(), sess.MerchantID)
	if err == nil {
		err = h.cfg.DB.Read(r.Context(), func(q store.Querier) error {
			var err error
			rows, err = vault.ListSubscriptions(r.Context(), q, sess.MerchantID, vault.SubscriptionFilter{
				CustomerLookupID: r.PathValue("customer"), LookupID: r.PathValue("subscription"), Limit: 1})
			if err != nil || len(rows) == 0 {
				return err
			}
			charges, err := billing.Charges(r.Context(), q, rows[0].ID)
			for _, c := range charges {
				pg.Charges = append(pg.Charges, chargeRow{Charge: c, Due: rows[0].Due(c.Cycle)})
			}
			return err
		})
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if len(rows) == 0 {
		h.notFound(w, r)
		return
	}
	s := rows[0]
	pg.SubscriptionRow, pg.Loc, pg.Retry, pg.CanEdit = s, m.Location(), billing.RetryOf(s.Subscription), isManager(sess.Role)
	pg.Final = s.Final()
	pg.CanPause = !pg.Final && s.Status != plan.StatusPaused
	pg.CanResume = s.Status == plan.StatusPaused
	pg.CanRetry = s.Status == plan.StatusRetry || s.Status == plan.StatusSuspended
	pg.AmountField, pg.AmountError = money.Format(s.Amount, s.Currency), amountError
	if amountError != "" {
		pg.AmountField = r.PostFormValue("amount")
	}
	v.Title, v.Data, v.Wide = "Subscription "+s.LookupID, pg, true
	h.render(w, r, status, "subscription", v)
}

// changeSubscription applies b to the subscription of the request's path through the vault's rules,
// and shows it with done, or with why it was refused.
func (h *Handler) changeSubscription(w http.ResponseWriter, r *http.Request, b vault.SubscriptionBody, done string) {
	m, err := h.cfg.Merchants.Get(r.Context(), signedIn(r).MerchantID)
	if err == nil {
		_, err = h.cfg.Vault.ChangeSubscription(r.Context(), m, r.PathValue("customer"), r.PathValue("subscription"), b)
	}
	if !h.answerRefusal(w, r, err, func(status int, msg string) { h.subscriptionRefused(w, r, status, msg, b.Amount.Set()) }) {
		h.renderSubscription(w, r, http.StatusOK, view{Notice: done}, "")
	}
}

// subscriptionRefused shows why an action on a subscription was refused: a subscription of another
// merchant or none is not found; a refused amount is shown beside its field.
func (h *Handler) subscriptionRefused(w http.ResponseWriter, r *http.Request, status int, msg string, amount bool) {
	switch {
	case status == http.StatusNotFound:
		h.notFound(w, r)
	case amount && status == http.StatusBadRequest:
		h.renderSubscription(w, r, status, view{Error: "The amount is not changed. Check the amount field."}, msg)
	default:
		h.renderSubscription(w, r, status, view{Error: msg}, "")
	}
}

// statusDone says what each status change did.
var statusDone = map[string]string{
	plan.StatusPaused:   "The subscription is paused: its cycles pass without a charge until it is resumed.",
	plan.StatusActive:   "The subscription is resumed: it is billed again from its next cycle due.",
	plan.StatusCanceled: "The subscription is canceled: it will not be billed again.",
}

// setStatus pauses, resumes or cancels a subscription. Only a paused subscription resumes here: a
// suspended one is retried (retryNow), whose charge is made once.
func (h *Handler) setStatus(status string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if status == plan.StatusActive {
			var cur []vault.SubscriptionRow
			err := h.cfg.DB.Read(r.Context(), func(q store.Querier) error {
				var err error
				cur, err = vault.ListSubscriptions(r.Context(), q, signedIn(r).MerchantID, vault.SubscriptionFilter{
					CustomerLookupID: r.PathValue("customer"), LookupID: r.PathValue("subscription"), Limit: 1})
				return err
			})
			if err == nil && len(cur) == 1 && cur[0].Status != plan.StatusPaused {
				err = fault.Conflict("subscription_not_paused", "Only a paused subscription can be resumed; this one is %s.", cur[0].Status)
			}
			if h.answerRefusal(w, r, err, func(status int, msg string) { h.subscriptionRefused(w, r, status, msg, false) }) {
				return
			}
		}
		h.changeSubscription(w, r, vault.SubscriptionBody{Status: field.Form(status)}, statusDone[status])
	}
}

// changeAmount changes what the subscription charges from its next cycle.
func (h *Handler) changeAmount(w http.ResponseWriter, r *http.Request) {
	amount := field.Form(r.PostFormValue("amount"))
	if !amount.Set() {
		h.subscriptionRefused(w, r, http.StatusBadRequest, "Enter the new amount.", true)
		return
	}
	h.changeSubscription(w, r, vault.SubscriptionBody{Amount: amount}, "The amount is changed: the next cycles charge it.")
}

// retryNow charges the unpaid cycle of a subscription in RETRY or SUSPENDED now, through the billing
// engine. The form carries the cycle and the declines it saw (billing.Retry), so that a double submit
// or a reload asks for the same charge, which the engine makes once.
func (h *Handler) retryNow(w http.ResponseWriter, r *http.Request) {
	cycle, err1 := strconv.Atoi(r.PostFormValue("cycle"))
	failed, err2 := strconv.Atoi(r.PostFormValue("failed"))
	if err1 != nil || err2 != nil {
		h.subscriptionRefused(w, r, http.StatusBadRequest, "This form is not one of this page's: reload the page and try again.", false)
		return
	}
	c, charged, err := h.cfg.Billing.RetryNow(r.Context(), signedIn(r).MerchantID, r.PathValue("customer"), r.PathValue("subscription"),
		billing.Retry{Cycle: cycle, Failed: failed})
	if h.answerRefusal(w, r, err, func(status int, msg string) { h.subscriptionRefused(w, r, status, msg, false) }) {
		return
	}
	notice := "This retry was made already (the form was sent twice, or the page reloaded): nothing more was charged. The history below shows its outcome."
	switch {
	case charged && c.Status == payment.StatusApproved:
		notice = "The retry is approved: " + money.Display(c.Amount, c.Currency, h.lang(r)) + " charged."
	case charged:
		notice = "The retry is declined: " + fault.Sentence(c.Message)
	}
	h.renderSubscription(w, r, http.StatusOK, view{Notice: notice}, "")
}
