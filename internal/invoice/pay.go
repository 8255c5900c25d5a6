package invoice

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/branding"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/hostedpage"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/store"

	"golang.org/x/text/language"
)

// Paying an invoice.
//
// An invoice is paid through a payment intent of the v1 payments core, its one live intent
// (invoices.intent_id): every card form opened from its page pays that intent, and so does a charge
// of a vault customer's stored card from the API. The intent's claim lets one charge run at a time
// and refuses a second once it succeeded, so an invoice is charged once however many pages and
// requests race. The intent is replaced only after it is canceled (by the form's cancel button, or
// because the invoice's total changed), and only by a compare-and-set from the one it replaces, so
// two intents of one invoice are never payable at once.
//
// The charge that takes the intent to succeeded marks the invoice PAID, with payment_info and
// paid_at, and queues the receipt in the outbox, in the transaction that records the charge's outcome
// on the intent (checkout.OnSucceeded → paid): a node that dies after the charge leaves the intent to
// be settled by the sweep, which marks the invoice PAID just the same.

// payable reports why inv cannot be paid, or nil: only a SENT or OVERDUE invoice is payable. A DRAFT
// is not, until it is sent: the merchant may still change it, and its customer has not been asked.
func payable(inv Invoice) error {
	switch inv.Status {
	case Sent, Overdue:
		return nil
	case Paid:
		return fault.Conflict("invoice_paid", "Invoice %s is paid.", inv.LookupID)
	case Cancelled:
		return fault.Conflict("invoice_cancelled", "Invoice %s was cancelled: there is nothing to pay.", inv.LookupID)
	}
	return fault.Conflict("invoice_not_sent", "Invoice %s is a DRAFT: it can be paid once sent.", inv.LookupID)
}

// intentWho is who the invoice service acts as on the payments core: the merchant, with no API key.
func intentWho(ctx context.Context, m merchant.Merchant) checkout.Who {
	return checkout.Who{Merchant: m, RequestID: httpapi.RequestID(ctx)}
}

// liveIntent returns the intent that pays inv now: its intent as it stands when it is still payable
// for the invoice's total, or a new one that replaced it. A payment of the old one in progress is a
// 409 to retry (it cannot be canceled while it runs).
func (s *Service) liveIntent(ctx context.Context, m merchant.Merchant, ref string) (Invoice, checkout.Intent, error) {
	who := intentWho(ctx, m)
	for range 3 {
		inv, err := s.get(ctx, m.ID, ref)
		if err != nil {
			return inv, checkout.Intent{}, err
		}
		if err := payable(inv); err != nil {
			return inv, checkout.Intent{}, err
		}
		if inv.IntentID != "" {
			in, err := s.checkout.Get(ctx, who, inv.IntentID)
			if err != nil {
				return inv, in, err
			}
			switch {
			case in.Status == checkout.StatusSucceeded:
				return inv, in, nil // settled as this ran: the invoice is PAID now
			case in.Status == checkout.StatusCanceled:
			case in.Amount == inv.Totals.Total && in.Currency.Code == inv.Currency.Code:
				return inv, in, nil
			default: // the invoice changed since its intent was made: that intent must never be paid
				if _, err := s.checkout.Cancel(ctx, who, in.IntentID, "abandoned"); err != nil {
					return inv, in, err
				}
			}
		}
		in, err := s.checkout.Create(ctx, who, checkout.IntentParams{Amount: inv.Totals.Total, Currency: inv.Currency,
			CaptureMethod: checkout.CaptureAutomatic, Description: "Invoice " + inv.Number, ReceiptEmail: inv.Customer.Email,
			Metadata: map[string]string{"invoice_lookup_id": inv.LookupID, "invoice_number": inv.Number}})
		if err != nil {
			return inv, in, err
		}
		bound, err := s.bind(ctx, inv, in.IntentID)
		if err != nil || !bound {
			// Another page or request bound its intent first: this one, which no page or request
			// was given, is canceled, and theirs is used.
			if _, cerr := s.checkout.Cancel(context.WithoutCancel(ctx), who, in.IntentID, "duplicate"); cerr != nil {
				s.log.ErrorContext(ctx, "cancel an unbound invoice intent", "intent", in.IntentID, "err", cerr)
			}
			if err != nil {
				return inv, in, err
			}
			continue
		}
		inv.IntentID = in.IntentID
		return inv, in, nil
	}
	return Invoice{}, checkout.Intent{}, fault.Busy("concurrent_update", "Invoice %s is being paid elsewhere; retry shortly.", ref)
}

// bind makes intentID the live intent of inv if its live intent is still the one inv was read with
// and it is still payable: false when another bound its own first.
func (s *Service) bind(ctx context.Context, inv Invoice, intentID string) (bool, error) {
	r, err := s.db.Exec(ctx, `UPDATE invoices SET intent_id = $2, version = version + 1
		WHERE id = $1 AND COALESCE(intent_id, '') = $3 AND status IN ('SENT', 'OVERDUE')`, inv.ID, intentID, inv.IntentID)
	if err != nil {
		return false, err
	}
	n, err := r.RowsAffected()
	return n == 1, err
}

// stopPayment cancels the live intent of inv, which is being cancelled, so that no page pays it: a
// payment running on it is a 409 (the cancellation may be retried once it ended, and it will find the
// invoice PAID or the intent back to be canceled). It returns the intent it stopped ("" for none).
func (s *Service) stopPayment(ctx context.Context, m merchant.Merchant, inv Invoice) (string, error) {
	if inv.IntentID == "" || s.checkout == nil {
		return "", nil
	}
	in, err := s.checkout.Get(ctx, intentWho(ctx, m), inv.IntentID)
	if err != nil || in.Status == checkout.StatusCanceled {
		return inv.IntentID, err
	}
	if in.Status == checkout.StatusSucceeded {
		return "", fault.Conflict("invoice_not_editable", "Invoice %s is paid: only a DRAFT or SENT invoice can change.", inv.LookupID)
	}
	if _, err := s.checkout.Cancel(ctx, intentWho(ctx, m), inv.IntentID, "abandoned"); err != nil {
		var f *fault.Error
		if errors.As(err, &f) && f.Status == http.StatusConflict {
			return "", fault.Busy("invoice_payment_in_progress", "Invoice %s is being paid; retry the cancellation shortly.", inv.LookupID)
		}
		return "", err
	}
	return inv.IntentID, nil
}

// paid is told of every intent whose charge succeeded, in the transaction that records it: the
// invoice whose live intent it is becomes PAID, with payment_info and paid_at, and its receipt goes to
// the customer's e-mail through the outbox. An intent of no invoice is none of its business.
func (s *Service) paid(ctx context.Context, tx *store.Tx, in checkout.Intent, t payment.Transaction) error {
	inv, err := scan(tx.QueryRowContext(ctx, `SELECT `+columns+` FROM invoices WHERE merchant_id = $1 AND intent_id = $2`,
		in.MerchantID, in.IntentID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	now := time.UnixMilli(s.now().UnixMilli())
	p := Payment{TransactionID: t.TransactionID, Method: "card", CardType: t.CardType, CardLast4: t.CardSuffix, Amount: t.Amount,
		Date: t.CreatedAt.UnixMilli()}
	if t.CreatedAt.IsZero() {
		p.Date = now.UnixMilli()
	}
	info, _ := json.Marshal(p)
	// A paid invoice is never reminded nor made OVERDUE: nothing left for the billing engine to check.
	r, err := tx.ExecContext(ctx, `UPDATE invoices SET status = 'PAID', payment_info = $3, paid_at = $4, updated_at = $4,
		next_check = NULL, version = version + 1 WHERE id = $1 AND intent_id = $2 AND status IN ('SENT', 'OVERDUE')`,
		inv.ID, in.IntentID, string(info), now.UnixMilli())
	if err != nil {
		return err
	}
	if n, err := r.RowsAffected(); err != nil || n != 1 {
		// Not reachable while the intent is replaced or stopped only as above; the money moved, so
		// its record must not be undone: say so for the merchant to refund.
		s.log.ErrorContext(ctx, "an invoice's intent succeeded while the invoice was not payable", "invoice", inv.LookupID,
			"status", inv.Status, "intent", in.IntentID, "transaction", t.TransactionID, "err", err)
		return nil
	}
	inv.Status, inv.Payment, inv.PaidAt, inv.UpdatedAt = Paid, &p, now, now
	if err := s.record(ctx, tx, event.InvoicePaid, inv, now); err != nil {
		return err
	}
	m, err := s.merchants.Get(ctx, inv.MerchantID)
	if err != nil {
		return err
	}
	if inv.Customer.Email != "" {
		brand, err := branding.Get(ctx, tx, m.ID)
		if err != nil {
			return err
		}
		err = billing.QueueReceipt(ctx, tx, m.ID, inv.Customer.Email, nil,
			billing.ReceiptOf(m, t, "Invoice "+inv.Number, now, m.Location()).Branded(brand, s.publicURL), now)
		if err != nil {
			return err
		}
	}
	return audit.Write(ctx, tx, audit.Record{MerchantID: m.ID, Operation: "invoice.pay", Resource: "invoice/" + inv.LookupID,
		TransactionID: t.TransactionID, Amount: t.Amount, Currency: t.Currency.Code, Outcome: audit.Done, RequestID: httpapi.RequestID(ctx), At: now})
}

// The card form of an invoice's page. Each view of a payable invoice's page redirects to a
// hosted-page session that pays its live intent. The session is the invoice's (invoices.session_id)
// and is handed out again while it serves (hostedpage.Session.Serves: no outcome, tries left, a
// quarter of an hour to live yet, on the live intent, showing the invoice as it stands), so that
// viewing the page again writes nothing; a new one takes its place once it no longer serves. A page
// URL's secret is stored only as its hash, so a session's secret is derived from the invoice's pay
// key (pageSecret): the page, which holds the key from its own link, makes it again.
//
// Two views racing for a new session get the same one: the session is made in the transaction that
// records it on the invoice, which holds the invoice's row (FOR UPDATE on PostgreSQL; SQLite has one
// writer), and the second finds the first's.

// pageSecret is the secret of the page URL of the invoice session sessionID: HMAC-SHA256 of the
// session id under the invoice's pay key, 256 bits. Only the holder of the pay link can make it, and
// it gives nothing of the pay key away.
func pageSecret(payKey, sessionID string) string {
	mac := hmac.New(sha256.New, []byte(payKey))
	mac.Write([]byte("kassa invoice card form\x00" + sessionID))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// errIntentChanged is what newSession finds when the invoice's live intent is no longer the one it was
// given, or the invoice is no longer payable: the page looks again.
var errIntentChanged = errors.New("invoice: the live intent changed")

// openPage returns the path of the card form that pays the invoice ref of the merchant, whose page was
// opened with its pay key key: the invoice's session while it serves, or a new one.
func (s *Service) openPage(ctx context.Context, m merchant.Merchant, ref, key string) (string, error) {
	for range 3 {
		inv, in, err := s.liveIntent(ctx, m, ref)
		if err != nil {
			return "", err
		}
		shown, now := pageInvoice(inv, m.Language()), s.now()
		id := ""
		if inv.SessionID != "" {
			err = s.db.Read(ctx, func(q store.Querier) error {
				ss, err := hostedpage.InvoiceSession(ctx, q, m.ID, inv.SessionID)
				if err == nil && ss.Serves(in.IntentID, shown, now) {
					id = ss.SessionID
				}
				if errors.Is(err, sql.ErrNoRows) {
					return nil
				}
				return err
			})
			if err != nil {
				return "", err
			}
		}
		if id == "" {
			id, err = s.newSession(ctx, m, inv, in, shown, key, now)
			if errors.Is(err, errIntentChanged) {
				continue
			}
			if err != nil {
				return "", err
			}
		}
		return hostedpage.PagePath(pageSecret(key, id)), nil
	}
	return "", fault.Busy("concurrent_update", "Invoice %s is being paid elsewhere; retry shortly.", ref)
}

// newSession returns the invoice's session as it stands in the transaction that holds its row, if it
// serves, or stores a new one on its intent in and records it on the invoice. It is errIntentChanged
// when in is no longer the invoice's live intent, or the invoice no longer payable.
func (s *Service) newSession(ctx context.Context, m merchant.Merchant, inv Invoice, in checkout.Intent, shown hostedpage.Invoice,
	key string, now time.Time) (string, error) {
	var id string
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		q := `SELECT COALESCE(session_id, '') FROM invoices WHERE id = $1 AND intent_id = $2 AND status IN ('SENT', 'OVERDUE')`
		if tx.Dialect() == store.Postgres {
			q += ` FOR UPDATE` // a second view waits here, then finds this one's session
		}
		var cur string
		err := tx.QueryRowContext(ctx, q, inv.ID, in.IntentID).Scan(&cur)
		if errors.Is(err, sql.ErrNoRows) {
			return errIntentChanged
		}
		if err != nil {
			return err
		}
		if cur != "" {
			ss, err := hostedpage.InvoiceSession(ctx, tx, m.ID, cur)
			if err == nil && ss.Serves(in.IntentID, shown, now) {
				id = ss.SessionID
				return nil
			}
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		ss, err := s.pages.NewInvoiceSession(ctx, tx, m, in, shown, func(sessionID string) string { return pageSecret(key, sessionID) })
		if err != nil {
			return err
		}
		// Not a change of the invoice as the API shows it: its version stays, so that a PUT read
		// before a customer's view is not refused for it.
		if _, err := tx.ExecContext(ctx, `UPDATE invoices SET session_id = $2 WHERE id = $1`, inv.ID, ss.SessionID); err != nil {
			return err
		}
		id = ss.SessionID
		return nil
	})
	return id, err
}

// pageInvoice is inv as the card form shows it, amounts in lang.
func pageInvoice(inv Invoice, lang language.Tag) hostedpage.Invoice {
	c := inv.Currency
	amt := func(v int64) string { return money.Display(v, c, lang) }
	out := hostedpage.Invoice{LookupID: inv.LookupID, Number: inv.Number, Totals: totalRows(inv, lang), Due: inv.DueDate}
	for _, it := range inv.Items {
		out.Lines = append(out.Lines, hostedpage.InvoiceLine{Description: it.Description,
			Quantity: formatDecimal(it.Quantity, QuantityScale) + " × " + amt(it.UnitPrice), Amount: amt(it.Total)})
	}
	return out
}

// totalRows are the invoice's totals as its page, form and e-mail show them, amounts in lang (the
// merchant's locale); the discount reads as the negative amount it is.
func totalRows(inv Invoice, lang language.Tag) [][2]string {
	c := inv.Currency
	amt := func(v int64) string { return money.Display(v, c, lang) }
	rows := [][2]string{{"Subtotal", amt(inv.Totals.Subtotal)}}
	if inv.Totals.Tax != 0 {
		rows = append(rows, [2]string{"Tax (" + formatDecimal(inv.TaxRate, RateScale) + "%)", amt(inv.Totals.Tax)})
	}
	if inv.Discount != 0 {
		rows = append(rows, [2]string{"Discount", amt(-inv.Discount)})
	}
	if inv.Shipping != 0 {
		rows = append(rows, [2]string{"Shipping", amt(inv.Shipping)})
	}
	return append(rows, [2]string{"Total", amt(inv.Totals.Total)})
}

// PayBody is the body of POST /invoice-service/invoice/{id}/pay: the vault customer's stored card.
type PayBody struct {
	CardLookupID string `json:"card_lookup_id"`
}

// PayWithCard charges one of the merchant's invoices on a stored card of its vault customer, through
// the invoice's live intent: the charge that succeeds marks it PAID (paid), and the invoice is
// answered as it then stands. A card not the customer's is a 404; an invoice not payable, or paid
// meanwhile, a 409; a decline a 402 card_declined, the invoice unchanged. The request's
// Idempotency-Key makes a retry answer as the first attempt did (the service's middleware, and the
// intent's claim for a retry whose first answer was lost).
func (s *Service) PayWithCard(ctx context.Context, m merchant.Merchant, ref string, b PayBody) (Invoice, error) {
	inv, err := s.get(ctx, m.ID, ref)
	if err != nil {
		return inv, err
	}
	if err := payable(inv); err != nil {
		return inv, err
	}
	if inv.Customer.LookupID == "" {
		return inv, fault.Conflict("no_vault_customer", "Invoice %s has no customer_lookup_id: only a vault customer's invoice is charged on a stored card.",
			inv.LookupID)
	}
	pm, err := s.vault.MethodFromCard(ctx, m.ID, "", inv.Customer.LookupID, b.CardLookupID)
	if err != nil {
		return inv, err
	}
	inv, in, err := s.liveIntent(ctx, m, ref)
	if err != nil {
		return inv, err
	}
	if in.Status == checkout.StatusSucceeded {
		return inv, payable(Invoice{LookupID: inv.LookupID, Status: Paid})
	}
	in, err = s.checkout.Confirm(ctx, intentWho(ctx, m), in.IntentID, checkout.ConfirmParams{PaymentMethod: pm.ID,
		Source: payment.SourceEcommerce, OrderID: inv.Number})
	if err != nil {
		var f *fault.Error
		if errors.As(err, &f) && f.Status == http.StatusConflict {
			// Another payment of the invoice is running or has succeeded.
			if cur, gerr := s.get(ctx, m.ID, ref); gerr == nil && cur.Status == Paid {
				return cur, payable(cur)
			}
			return inv, fault.Busy("invoice_payment_in_progress", "Invoice %s is being paid; retry shortly.", inv.LookupID)
		}
		return inv, err
	}
	switch in.Status {
	case checkout.StatusSucceeded:
		return s.get(ctx, m.ID, ref)
	case checkout.StatusRequiresPaymentMethod:
		msg := "The card was declined."
		if in.LastError != nil && in.LastError.Message != "" {
			msg = in.LastError.Message
		}
		return inv, fault.New(http.StatusPaymentRequired, "card_declined", "%s", msg)
	}
	return inv, fault.Busy("invoice_payment_in_progress", "The payment of invoice %s awaits the processor's answer; retry shortly.", inv.LookupID)
}

func (s *Service) handlePay(w http.ResponseWriter, r *http.Request) {
	_, m, err := payment.Who(r.Context(), s.merchants)
	var b PayBody
	if err == nil {
		err = httpapi.DecodeJSON(r, &b)
	}
	var inv Invoice
	if err == nil {
		inv, err = s.PayWithCard(r.Context(), m, r.PathValue("id"), b)
	}
	s.write(w, r, inv, err)
}
