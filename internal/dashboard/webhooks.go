package dashboard

import (
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/webhook"
)

// Settings → Webhooks: the merchant's webhook endpoints, managed as through the API, and each one's
// delivery log with a resend action and a test event, through the endpoint store's own methods (webhook.Endpoints),
// so that the rules are the API's. Readers (reporting included) see the
// endpoints and their logs; managers, who manage API keys, make, change, enable, disable and delete
// them, see and rotate their secrets, resend deliveries and send test events. Each attempt shows the
// request sent and the answer; an attempt without an answer shows only one of the log's phrases. A secret is shown only on the page that
// answers its creation, its rotation or a manager's "Show the secret".

const webhooksPath = "/dashboard/settings/webhooks"

// webhookRoutes registers Settings → Webhooks.
func (h *Handler) webhookRoutes(r *httpapi.Router) {
	r.Handle("GET", webhooksPath, h.requireRole(readers, h.webhooks))
	r.Handle("GET", webhooksPath+"/new", h.requireRole(managers, h.newWebhook))
	r.Handle("POST", webhooksPath+"/new", h.requireRole(managers, h.createWebhook))
	r.Handle("GET", webhooksPath+"/{id}", h.requireRole(readers, h.showWebhook))
	r.Handle("POST", webhooksPath+"/{id}", h.requireRole(managers, h.updateWebhook))
	r.Handle("POST", webhooksPath+"/{id}/enable", h.requireRole(managers, h.enableWebhook(false)))
	r.Handle("POST", webhooksPath+"/{id}/disable", h.requireRole(managers, h.enableWebhook(true)))
	r.Handle("POST", webhooksPath+"/{id}/secret", h.requireRole(managers, h.revealWebhookSecret))
	r.Handle("POST", webhooksPath+"/{id}/rotate", h.requireRole(managers, h.rotateWebhookSecret))
	r.Handle("POST", webhooksPath+"/{id}/delete", h.requireRole(managers, h.deleteWebhook))
	r.Handle("POST", webhooksPath+"/{id}/deliveries/{delivery}/resend", h.requireRole(managers, h.resendDelivery))
	r.Handle("POST", webhooksPath+"/{id}/test", h.requireRole(managers, h.sendTestEvent))
}

// webhookRow is an endpoint as the list shows it, with how its newest delivery went.
type webhookRow struct {
	webhook.Endpoint
	Summary webhook.Summary
}

// webhooksPage is what the list shows.
type webhooksPage struct {
	Rows    []webhookRow
	CanEdit bool
	Max     int
	Loc     *time.Location
	Empty   *emptyState // in place of the table when there is no endpoint
}

// webhooks lists the merchant's endpoints, newest first.
func (h *Handler) webhooks(w http.ResponseWriter, r *http.Request) {
	m, ok := h.paymentsMerchant(w, r)
	if !ok {
		return
	}
	pg := webhooksPage{CanEdit: isManager(signedIn(r).Role), Max: webhook.MaxEndpoints, Loc: m.Location()}
	es, err := h.cfg.Webhooks.List(r.Context(), m.ID)
	for _, e := range es {
		if err != nil {
			break
		}
		row := webhookRow{Endpoint: e}
		row.Summary, err = h.cfg.Webhooks.Summarize(r.Context(), e.ID)
		pg.Rows = append(pg.Rows, row)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if len(pg.Rows) == 0 {
		pg.Empty = &emptyState{ID: "webhooks-empty", Heading: "No endpoints yet",
			About:  "An endpoint is a URL of your server that hears of payments, refunds, customers and subscriptions as they happen.",
			Action: actionIf(pg.CanEdit, link{"Add an endpoint", webhooksPath + "/new"})}
	}
	v := view{Title: "Webhooks", Wide: true, Data: pg}
	if d := r.URL.Query().Get("deleted"); d != "" {
		v.Notice = "The endpoint " + d + " is deleted, with its delivery log."
	}
	h.render(w, r, http.StatusOK, "webhooks", v)
}

// webhookForm is the form of an endpoint's fields, and the field a refusal names.
type webhookForm struct {
	URL, Description  string
	All               bool            // every event type, those to come included
	Ticked            map[string]bool // the types chosen, when not All
	Types             []string
	Field, FieldError string
}

// webhookPage is what an endpoint's page shows: the endpoint, for managers as a form, its secret when
// just made, rotated or asked for, and its delivery log.
type webhookPage struct {
	New        bool
	Endpoint   webhook.Endpoint
	Form       webhookForm
	Secret     string
	Summary    webhook.Summary
	Deliveries []webhook.Delivery
	Pager      pager
	CanEdit    bool
	Loc        *time.Location
}

// formOfEndpoint is an endpoint's form as it stands.
func formOfEndpoint(e webhook.Endpoint) webhookForm {
	f := webhookForm{URL: e.URL, Description: e.Description, Ticked: map[string]bool{}}
	for _, t := range e.EnabledEvents {
		if t == webhook.AllEvents {
			f.All = true
		}
		f.Ticked[t] = true
	}
	return f
}

// webhookBody reads the endpoint form: every field is sent, "events" chooses every type or those
// ticked ("event").
func webhookBody(r *http.Request) (webhook.EndpointBody, webhookForm) {
	f := webhookForm{URL: r.PostFormValue("url"), Description: r.PostFormValue("description"), All: r.PostFormValue("events") != "chosen",
		Ticked: map[string]bool{}}
	types := r.PostForm["event"]
	for _, t := range types {
		f.Ticked[t] = true
	}
	if f.All {
		types = []string{webhook.AllEvents}
	}
	if types == nil {
		types = []string{}
	}
	return webhook.EndpointBody{URL: &f.URL, Description: &f.Description, EnabledEvents: &types}, f
}

// newWebhook shows the form of a new endpoint, subscribed to every event unless chosen otherwise.
func (h *Handler) newWebhook(w http.ResponseWriter, r *http.Request) {
	h.renderWebhook(w, r, http.StatusOK, webhookPage{New: true, Form: webhookForm{All: true}}, view{})
}

// renderWebhook shows an endpoint's page (or the form of a new one).
func (h *Handler) renderWebhook(w http.ResponseWriter, r *http.Request, status int, pg webhookPage, v view) {
	m, ok := h.paymentsMerchant(w, r)
	if !ok {
		return
	}
	pg.CanEdit, pg.Loc, pg.Form.Types = isManager(signedIn(r).Role), m.Location(), event.Types
	v.Title, v.Wide, v.Data = "Webhook endpoint "+pg.Endpoint.EndpointID, true, pg
	if pg.New {
		v.Title = "New webhook endpoint"
	}
	h.render(w, r, status, "webhook", v)
}

// showWebhook shows one of the merchant's endpoints with a page of its delivery log, newest first.
func (h *Handler) showWebhook(w http.ResponseWriter, r *http.Request) {
	v := view{}
	q := r.URL.Query()
	switch {
	case q.Get("saved") != "":
		v.Notice = "The endpoint is saved."
	case q.Get("resent") != "":
		v.Notice = "The event is queued for delivery again, as " + q.Get("resent") + "."
	case q.Get("tested") != "":
		v.Notice = "A test event is queued for this endpoint, as " + q.Get("tested") + ": its attempts show below."
	}
	h.showWebhookWith(w, r, http.StatusOK, "", v)
}

// showWebhookWith shows the endpoint of the request's path with secret (when not ""), or why it
// cannot.
func (h *Handler) showWebhookWith(w http.ResponseWriter, r *http.Request, status int, secret string, v view) {
	ctx, merchantID, id := r.Context(), signedIn(r).MerchantID, r.PathValue("id")
	c := cursorsOf(r.URL.Query())
	pg := webhookPage{Secret: secret}
	var more bool
	e, err := h.cfg.Webhooks.Get(ctx, merchantID, id)
	if err == nil {
		pg.Endpoint, pg.Form = e, formOfEndpoint(e)
		pg.Summary, err = h.cfg.Webhooks.Summarize(ctx, e.ID)
	}
	if err == nil {
		pg.Deliveries, more, err = h.cfg.Webhooks.Deliveries(ctx, merchantID, id,
			checkout.ListParams{Limit: pageSize, StartingAfter: c.After, EndingBefore: c.Before})
	}
	if h.webhookRefused(w, r, err, pg, v) {
		return
	}
	if n := len(pg.Deliveries); n > 0 {
		pg.Pager = c.links(r.URL.Query(), webhook.DeliveryID(pg.Deliveries[0].ID), webhook.DeliveryID(pg.Deliveries[n-1].ID), more)
	}
	h.renderWebhook(w, r, status, pg, v)
}

// webhookRefused answers a refusal of the endpoint store: not found as such, a refused field beside
// its field, anything else above the form. It reports whether it answered.
func (h *Handler) webhookRefused(w http.ResponseWriter, r *http.Request, err error, pg webhookPage, v view) bool {
	return h.answerRefusal(w, r, err, func(status int, msg string) {
		var f *fault.Error
		errors.As(err, &f)
		if status == http.StatusNotFound {
			h.render(w, r, status, "message", view{Title: "Not found", Error: msg})
			return
		}
		v.Error = msg
		if f.Field == "url" || f.Field == "enabled_events" || f.Field == "description" {
			pg.Form.Field, pg.Form.FieldError = f.Field, msg
			v.Error = "The endpoint is not saved. Check the field marked below."
		}
		h.renderWebhook(w, r, status, pg, v)
	})
}

// createWebhook makes an endpoint from the form and shows its page with the secret, this once.
func (h *Handler) createWebhook(w http.ResponseWriter, r *http.Request) {
	b, form := webhookBody(r)
	e, secret, err := h.cfg.Webhooks.Create(r.Context(), signedIn(r).MerchantID, b, webhook.Actor{RequestID: httpapi.RequestID(r.Context())})
	if h.webhookRefused(w, r, err, webhookPage{New: true, Form: form}, view{}) {
		return
	}
	h.renderWebhook(w, r, http.StatusOK, webhookPage{Endpoint: e, Form: formOfEndpoint(e), Secret: secret},
		view{Notice: "The endpoint is made. Copy its signing secret now, to verify the events it receives."})
}

// updateWebhook saves the form's changes to an endpoint.
func (h *Handler) updateWebhook(w http.ResponseWriter, r *http.Request) {
	b, form := webhookBody(r)
	h.changeWebhook(w, r, b, form, "?saved=1")
}

// enableWebhook enables (disable false) or disables an endpoint; enabling it clears why Kassa
// disabled it.
func (h *Handler) enableWebhook(disable bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h.changeWebhook(w, r, webhook.EndpointBody{Disabled: &disable}, webhookForm{}, "?saved=1")
	}
}

// changeWebhook applies b to the endpoint of the request's path and sends the browser back to its
// page with then; a refusal is shown with form.
func (h *Handler) changeWebhook(w http.ResponseWriter, r *http.Request, b webhook.EndpointBody, form webhookForm, then string) {
	ctx, merchantID, id := r.Context(), signedIn(r).MerchantID, r.PathValue("id")
	_, err := h.cfg.Webhooks.Update(ctx, merchantID, id, b, webhook.Actor{RequestID: httpapi.RequestID(ctx)})
	var f *fault.Error
	if errors.As(err, &f) && f.Field != "" {
		e, gerr := h.cfg.Webhooks.Get(ctx, merchantID, id)
		if gerr != nil {
			err = gerr
		}
		h.webhookRefused(w, r, err, webhookPage{Endpoint: e, Form: form}, view{})
		return
	}
	if h.webhookRefused(w, r, err, webhookPage{}, view{}) {
		return
	}
	http.Redirect(w, r, webhooksPath+"/"+id+then, http.StatusSeeOther)
}

// revealWebhookSecret shows the endpoint's current secret, to a manager who asked for it.
func (h *Handler) revealWebhookSecret(w http.ResponseWriter, r *http.Request) {
	secret, err := h.cfg.Webhooks.Secret(r.Context(), signedIn(r).MerchantID, r.PathValue("id"))
	if h.webhookRefused(w, r, err, webhookPage{}, view{}) {
		return
	}
	h.showWebhookWith(w, r, http.StatusOK, secret, view{})
}

// rotateWebhookSecret gives the endpoint a new secret and shows it; the old one keeps signing for 24
// hours.
func (h *Handler) rotateWebhookSecret(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	secret, err := h.cfg.Webhooks.RotateSecret(ctx, signedIn(r).MerchantID, r.PathValue("id"), webhook.Actor{RequestID: httpapi.RequestID(ctx)})
	if h.webhookRefused(w, r, err, webhookPage{}, view{}) {
		return
	}
	h.showWebhookWith(w, r, http.StatusOK, secret, view{Notice: "The secret is new. Events are signed with both the new and the old secret for 24 hours: put the new one in your server before then."})
}

// deleteWebhook deletes an endpoint with its delivery log.
func (h *Handler) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	e, err := h.cfg.Webhooks.Delete(ctx, signedIn(r).MerchantID, r.PathValue("id"), webhook.Actor{RequestID: httpapi.RequestID(ctx)})
	if h.webhookRefused(w, r, err, webhookPage{}, view{}) {
		return
	}
	http.Redirect(w, r, webhooksPath+"?deleted="+url.QueryEscape(e.URL), http.StatusSeeOther)
}

// sendTestEvent queues a test event (webhook_endpoint.ping) for the endpoint alone.
func (h *Handler) sendTestEvent(w http.ResponseWriter, r *http.Request) {
	ctx, id := r.Context(), r.PathValue("id")
	d, err := h.cfg.Webhooks.Ping(ctx, signedIn(r).MerchantID, id, webhook.Actor{RequestID: httpapi.RequestID(ctx)})
	if h.disabledRefused(w, r, err, "send a test event") || h.webhookRefused(w, r, err, webhookPage{}, view{}) {
		return
	}
	http.Redirect(w, r, webhooksPath+"/"+id+"?tested="+webhook.DeliveryID(d.ID), http.StatusSeeOther)
}

// disabledRefused answers the refusal of an action on a disabled endpoint (endpoint_disabled) on the
// endpoint's page, saying to enable it, then to do what (the action). It reports whether it answered.
func (h *Handler) disabledRefused(w http.ResponseWriter, r *http.Request, err error, what string) bool {
	var f *fault.Error
	if !errors.As(err, &f) || f.Code != "endpoint_disabled" {
		return false
	}
	h.showWebhookWith(w, r, http.StatusConflict, "", view{Error: "This endpoint is disabled, so nothing is sent to it: enable it, then " + what + "."})
	return true
}

// resendDelivery queues a new delivery of a delivery's event to its endpoint.
func (h *Handler) resendDelivery(w http.ResponseWriter, r *http.Request) {
	ctx, id := r.Context(), r.PathValue("id")
	d, err := h.cfg.Webhooks.Resend(ctx, signedIn(r).MerchantID, id, r.PathValue("delivery"), webhook.Actor{RequestID: httpapi.RequestID(ctx)})
	if h.disabledRefused(w, r, err, "resend") || h.webhookRefused(w, r, err, webhookPage{}, view{}) {
		return
	}
	http.Redirect(w, r, webhooksPath+"/"+id+"?resent="+webhook.DeliveryID(d.ID), http.StatusSeeOther)
}
