package webhook

import (
	"io"
	"net/http"

	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/httpapi"
)

// Routes registers the v1 API of webhook endpoints and their delivery log,
// behind the v1 API's keys (c.Protect): reading needs webhooks:read, changing webhooks:write. Secrets
// are changes' business: reading one needs webhooks:write too, as it lets its holder forge events.
func (s *Endpoints) Routes(r *httpapi.Router, c *checkout.Service) {
	h := func(p checkout.Permissions, f func(*http.Request, checkout.Who, []byte) (any, error)) http.Handler {
		return c.Protect(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { serve(w, r, f) }))
	}
	r.Handle("POST", "/v1/webhook-endpoints", h(checkout.WebhooksWrite, s.handleCreate))
	r.Handle("GET", "/v1/webhook-endpoints", h(checkout.WebhooksRead, s.handleList))
	r.Handle("GET", "/v1/webhook-endpoints/{id}", h(checkout.WebhooksRead, s.handleGet))
	r.Handle("PATCH", "/v1/webhook-endpoints/{id}", h(checkout.WebhooksWrite, s.handleUpdate))
	r.Handle("DELETE", "/v1/webhook-endpoints/{id}", h(checkout.WebhooksWrite, s.handleDelete))
	r.Handle("GET", "/v1/webhook-endpoints/{id}/secret", h(checkout.WebhooksWrite, s.handleSecret))
	r.Handle("POST", "/v1/webhook-endpoints/{id}/secret/rotate", h(checkout.WebhooksWrite, s.handleRotate))
	r.Handle("GET", "/v1/webhook-endpoints/{id}/deliveries", h(checkout.WebhooksRead, s.handleDeliveries))
	r.Handle("POST", "/v1/webhook-endpoints/{id}/deliveries/{delivery}/resend", h(checkout.WebhooksWrite, s.handleResend))
}

// serve runs f for the merchant the request acts for (a partner's own account has no endpoints), and
// writes its answer or its error.
func serve(w http.ResponseWriter, r *http.Request, f func(*http.Request, checkout.Who, []byte) (any, error)) {
	who, err := checkout.CallerFrom(r.Context()).Who(httpapi.RequestID(r.Context()))
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	var body []byte
	if r.Method != http.MethodGet {
		if body, err = io.ReadAll(r.Body); err != nil {
			httpapi.WriteError(w, r, httpapi.BodyError(err))
			return
		}
	}
	out, err := f(r, who, body)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// actorOf is who a v1 request acts as, for the audit log.
func actorOf(who checkout.Who) Actor { return Actor{ClientID: who.ClientID, RequestID: who.RequestID} }

func (s *Endpoints) handleCreate(r *http.Request, who checkout.Who, body []byte) (any, error) {
	b, err := ParseEndpointBody(body)
	if err != nil {
		return nil, err
	}
	e, secret, err := s.Create(r.Context(), who.Merchant.ID, b, actorOf(who))
	out := e.Wire()
	out.Secret = secret
	return out, err
}

func (s *Endpoints) handleList(r *http.Request, who checkout.Who, _ []byte) (any, error) {
	es, err := s.List(r.Context(), who.Merchant.ID)
	out := checkout.List[WireEndpoint]{Object: "list", Data: make([]WireEndpoint, len(es))}
	for i, e := range es {
		out.Data[i] = e.Wire()
	}
	return out, err
}

func (s *Endpoints) handleGet(r *http.Request, who checkout.Who, _ []byte) (any, error) {
	e, err := s.Get(r.Context(), who.Merchant.ID, r.PathValue("id"))
	return e.Wire(), err
}

func (s *Endpoints) handleUpdate(r *http.Request, who checkout.Who, body []byte) (any, error) {
	b, err := ParseEndpointBody(body)
	if err != nil {
		return nil, err
	}
	e, err := s.Update(r.Context(), who.Merchant.ID, r.PathValue("id"), b, actorOf(who))
	return e.Wire(), err
}

func (s *Endpoints) handleDelete(r *http.Request, who checkout.Who, _ []byte) (any, error) {
	e, err := s.Delete(r.Context(), who.Merchant.ID, r.PathValue("id"), actorOf(who))
	return map[string]any{"id": e.EndpointID, "object": "webhook_endpoint", "deleted": true}, err
}

func (s *Endpoints) handleSecret(r *http.Request, who checkout.Who, _ []byte) (any, error) {
	secret, err := s.Secret(r.Context(), who.Merchant.ID, r.PathValue("id"))
	return map[string]string{"secret": secret}, err
}

func (s *Endpoints) handleRotate(r *http.Request, who checkout.Who, body []byte) (any, error) {
	var none struct{}
	if err := httpapi.UnmarshalStrict(body, &none, ""); err != nil {
		return nil, err
	}
	secret, err := s.RotateSecret(r.Context(), who.Merchant.ID, r.PathValue("id"), actorOf(who))
	return map[string]string{"secret": secret}, err
}

func (s *Endpoints) handleDeliveries(r *http.Request, who checkout.Who, _ []byte) (any, error) {
	p, err := checkout.ParseListParams(r.URL.Query())
	if err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	ds, more, err := s.Deliveries(r.Context(), who.Merchant.ID, id, p)
	out := checkout.List[WireDelivery]{Object: "list", Data: make([]WireDelivery, len(ds)), HasMore: more}
	for i, d := range ds {
		out.Data[i] = d.Wire(id)
	}
	return out, err
}

func (s *Endpoints) handleResend(r *http.Request, who checkout.Who, body []byte) (any, error) {
	var none struct{}
	if err := httpapi.UnmarshalStrict(body, &none, ""); err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	d, err := s.Resend(r.Context(), who.Merchant.ID, id, r.PathValue("delivery"), actorOf(who))
	return d.Wire(id), err
}
