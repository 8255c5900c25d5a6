package hostedpage

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/velocity"
)

// wireSession is the session response: "id", "payment_intent" (its id, or the whole object when the
// request asks expand=payment_intent) and "url"; when the URL stops working, and what the session
// asked of its page (return_url, null for none, and appearance). The session's events carry it with
// the intent expanded and without the URL, which is the page's credential and is not stored (only its
// hash is).
type wireSession struct {
	ID            string  `json:"id"`
	Object        string  `json:"object"`
	PaymentIntent any     `json:"payment_intent"`
	URL           string  `json:"url,omitempty"`
	ExpiresAt     int64   `json:"expires_at"`
	ReturnURL     *string `json:"return_url"`
	Appearance    string  `json:"appearance"`
}

// wire renders ss with its payment intent (its id or its WireIntent) and its page URL ("" in events).
func (ss Session) wire(intent any, url string) wireSession {
	out := wireSession{ID: ss.SessionID, Object: "hosted_payment_page.session", PaymentIntent: intent, URL: url, ExpiresAt: ss.ExpiresAt.Unix(),
		Appearance: ss.Appearance}
	if ss.ReturnURL != "" {
		out.ReturnURL = &ss.ReturnURL
	}
	return out
}

// handleCreate serves POST /v1/checkout/hosted-payment-page/sessions. The body is a payment-intent
// creation ("every payment-intent field is accepted and validated as there") with two differences:
// billing_details "is removed from the body before it is passed on" and prefills the form, and
// payment_method_types is "always set to ["card"] by the service". expand (in the query string or
// the body) may ask for the payment intent as an object. return_url and appearance, Kassa's own
// fields, are taken out too: they are the page's, not the intent's.
func (s *Service) handleCreate(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	who, err := checkout.CallerFrom(ctx).Who(httpapi.RequestID(ctx))
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		httpapi.WriteError(w, r, httpapi.BodyError(err))
		return
	}
	req, err := parseSessionRequest(body, r.URL.Query()["expand"])
	var p checkout.IntentParams
	if err == nil && req.page.returnURL != "" {
		err = checkReturnURL(req.page.returnURL, who.Merchant.Settings)
	}
	if err == nil {
		p, err = req.intent.Params(who.Merchant)
	}
	if err == nil {
		// Session creation is limited per key: each session's URL is 10 tries at a card, so the
		// sessions are counted before one is created.
		err = s.velocity.Take(ctx, velocity.Sessions(who.Principal), who.Merchant.Velocity)
	}
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	in, err := s.checkout.Create(ctx, who, p)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	ss, url, err := s.create(ctx, who, in, req.page, "", Dashboard{})
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	out := ss.wire(in.IntentID, url)
	if req.expandIntent {
		out.PaymentIntent = in.Wire()
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// sessionRequest is a session creation, read.
type sessionRequest struct {
	intent       checkout.IntentBody
	page         shopPage
	expandIntent bool
}

// parseSessionRequest reads a session creation's body, with the expand values of the query string.
// Every fault is a 400 naming its field.
func parseSessionRequest(body []byte, expand []string) (sessionRequest, error) {
	var req sessionRequest
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return req, fault.Invalid("", "The body must be a JSON object of payment-intent fields.")
	}
	if raw, ok := fields["expand"]; ok {
		var list []string
		if err := json.Unmarshal(raw, &list); err != nil {
			return req, fault.Invalid("expand", "expand must be a list of strings, such as [\"payment_intent\"]")
		}
		expand = append(expand, list...)
		delete(fields, "expand")
	}
	for _, e := range expand {
		if e != "payment_intent" {
			return req, fault.Invalid("expand", "expand may name only payment_intent")
		}
	}
	req.expandIntent = len(expand) > 0
	if raw, ok := fields["billing_details"]; ok {
		var err error
		if req.page.billing, err = parseBilling(raw); err != nil {
			return req, err
		}
		delete(fields, "billing_details")
	}
	if raw, ok := fields["return_url"]; ok {
		if err := json.Unmarshal(raw, &req.page.returnURL); err != nil || req.page.returnURL == "" {
			return req, fault.Invalid("return_url", "return_url must be a URL as a string, such as \"https://shop.example/orders/1001\"")
		}
		delete(fields, "return_url")
	}
	var appearance *string
	if raw, ok := fields["appearance"]; ok {
		if err := json.Unmarshal(raw, &appearance); err != nil || appearance == nil {
			return req, fault.Invalid("appearance", "appearance must be light, dark or auto")
		}
		delete(fields, "appearance")
	}
	var err error
	if req.page.appearance, err = parseAppearance(appearance); err != nil {
		return req, err
	}
	delete(fields, "payment_method_types") // forced to ["card"]: the intent's only type
	rest, _ := json.Marshal(fields)
	req.intent, err = checkout.ParseIntentBody(rest)
	return req, err
}
