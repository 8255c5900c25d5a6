package checkout

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/idempotency"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/vault"
)

// The handlers of payment methods and payment intents: each reads its request strictly, calls the
// service method for the caller's merchant, and answers with the resource. A decline is not an error:
// the answer to a confirmation is the intent, 200, whatever its outcome.

// handle runs f for the merchant the request acts for, and writes its answer or its error.
func (s *Service) handle(w http.ResponseWriter, r *http.Request, f func(Who, []byte) (any, error)) {
	ctx := r.Context()
	who, err := CallerFrom(ctx).Who(httpapi.RequestID(ctx))
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	var body []byte
	if r.Method != http.MethodGet {
		if body, err = readBody(r); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
	}
	out, err := f(who, body)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

func (s *Service) handleCreatePaymentMethod(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, func(who Who, body []byte) (any, error) {
		nm, err := vault.ParseMethodRequest(body, s.now())
		if err != nil {
			return nil, err
		}
		// The CVC was checked; it goes no further (PCI DSS 3.3.1). See docs/design/checkout.md.
		m, err := s.vault.CreateMethod(r.Context(), who.Merchant.ID, who.ClientID, nm)
		return m.Wire(), err
	})
}

func (s *Service) handleGetPaymentMethod(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, func(who Who, _ []byte) (any, error) {
		m, err := s.vault.Method(r.Context(), who.Merchant.ID, r.PathValue("id"))
		if err != nil {
			var f *fault.Error
			if errors.As(err, &f) && f.Status == http.StatusNotFound {
				f.Field = "" // the id is the path's, not a field's
			}
			return nil, err
		}
		return m.Wire(), nil
	})
}

func (s *Service) handleCreateIntent(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, func(who Who, body []byte) (any, error) {
		b, err := ParseIntentBody(body)
		if err != nil {
			return nil, err
		}
		p, err := b.Params(who.Merchant)
		if err != nil {
			return nil, err
		}
		in, err := s.Create(r.Context(), who, p)
		return in.Wire(), err
	})
}

func (s *Service) handleGetIntent(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, func(who Who, _ []byte) (any, error) {
		in, err := s.Get(r.Context(), who, r.PathValue("id"))
		return in.Wire(), err
	})
}

func (s *Service) handleListIntents(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, func(who Who, _ []byte) (any, error) {
		p, err := ParseListParams(r.URL.Query())
		if err != nil {
			return nil, err
		}
		items, more, err := s.List(r.Context(), who, p)
		return wireList(items, more, Intent.Wire), err
	})
}

func (s *Service) handleUpdateIntent(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, func(who Who, body []byte) (any, error) {
		b, err := ParseIntentBody(body)
		if err != nil {
			return nil, err
		}
		in, err := s.Update(r.Context(), who, r.PathValue("id"), b)
		return in.Wire(), err
	})
}

// confirmBody is the body of a confirmation. payment_method_id and payment_method are the same field:
// Kassa's name for it, and the name the industry's payment-intent APIs use.
type confirmBody struct {
	PaymentMethodID *string `json:"payment_method_id"`
	PaymentMethod   *string `json:"payment_method"`
}

// parseConfirm reads the payment method of a confirmation; "" for the intent's own.
func parseConfirm(body []byte) (string, error) {
	var b confirmBody
	if err := httpapi.UnmarshalStrict(body, &b, ""); err != nil {
		return "", err
	}
	switch {
	case b.PaymentMethodID != nil && b.PaymentMethod != nil && *b.PaymentMethodID != *b.PaymentMethod:
		return "", fault.Invalid("payment_method", "payment_method_id and payment_method name the same field; send one")
	case b.PaymentMethodID != nil && *b.PaymentMethodID == "":
		return "", fault.Invalid("payment_method_id", "payment_method_id must be the id of a payment method (pm_…)")
	case b.PaymentMethod != nil && *b.PaymentMethod == "":
		return "", fault.Invalid("payment_method", "payment_method must be the id of a payment method (pm_…)")
	case b.PaymentMethodID != nil:
		return *b.PaymentMethodID, nil
	case b.PaymentMethod != nil:
		return *b.PaymentMethod, nil
	}
	return "", nil
}

// parseCapture reads the amount of a capture; nil for all that is capturable. Its bound, amount_capturable,
// is checked against the intent.
func parseCapture(body []byte) (*int64, error) {
	var b struct {
		AmountToCapture *int64 `json:"amount_to_capture"`
	}
	err := httpapi.UnmarshalStrict(body, &b, "")
	return b.AmountToCapture, err
}

// parseCancel reads the reason of a cancellation; "" for none.
func parseCancel(body []byte) (string, error) {
	var b struct {
		CancellationReason *string `json:"cancellation_reason"`
	}
	if err := httpapi.UnmarshalStrict(body, &b, ""); err != nil || b.CancellationReason == nil {
		return "", err
	}
	if !slices.Contains(cancellationReasons, *b.CancellationReason) {
		return "", fault.Invalid("cancellation_reason", "cancellation_reason must be one of %s", strings.Join(cancellationReasons, ", "))
	}
	return *b.CancellationReason, nil
}

func (s *Service) handleConfirm(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, func(who Who, body []byte) (any, error) {
		pm, err := parseConfirm(body)
		if err != nil {
			return nil, err
		}
		in, err := s.Confirm(r.Context(), who, r.PathValue("id"), ConfirmParams{PaymentMethod: pm, Source: payment.SourceEcommerce})
		if in.Limit != nil {
			httpapi.WriteRateLimit(w.Header(), in.Limit)
		}
		return in.Wire(), err
	})
}

func (s *Service) handleCapture(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, func(who Who, body []byte) (any, error) {
		amount, err := parseCapture(body)
		if err != nil {
			return nil, err
		}
		in, err := s.Capture(r.Context(), who, r.PathValue("id"), amount)
		return in.Wire(), err
	})
}

func (s *Service) handleCancel(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, func(who Who, body []byte) (any, error) {
		reason, err := parseCancel(body)
		if err != nil {
			return nil, err
		}
		in, err := s.Cancel(r.Context(), who, r.PathValue("id"), reason)
		return in.Wire(), err
	})
}

func (s *Service) handleCreateRefund(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, func(who Who, body []byte) (any, error) {
		p, err := ParseRefundBody(body)
		if err != nil {
			return nil, err
		}
		p.IdempotencyKey = idempotency.Key(r.Context())
		rf, err := s.Refund(r.Context(), who, p)
		return rf.Wire(), err
	})
}

func (s *Service) handleGetRefund(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, func(who Who, _ []byte) (any, error) {
		rf, err := s.GetRefund(r.Context(), who, r.PathValue("id"))
		return rf.Wire(), err
	})
}

// handleListRefunds serves GET /v1/refunds: newest first, paged as every v1 list, of one intent with
// payment_intent.
func (s *Service) handleListRefunds(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, func(who Who, _ []byte) (any, error) {
		p, err := ParseListParams(r.URL.Query())
		if err != nil {
			return nil, err
		}
		items, more, err := s.ListRefunds(r.Context(), who, r.URL.Query().Get("payment_intent"), p)
		return wireList(items, more, Refund.Wire), err
	})
}

// wireList is a page of items as a v1 list shows it, each rendered by wire.
func wireList[T, W any](items []T, more bool, wire func(T) W) List[W] {
	out := List[W]{Object: "list", Data: make([]W, len(items)), HasMore: more}
	for i, v := range items {
		out.Data[i] = wire(v)
	}
	return out
}
