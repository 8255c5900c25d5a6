package checkout

import (
	"context"
	"errors"
	"time"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/idempotency"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/vault"
	"github.com/kassapay/kassa/internal/velocity"
)

// Every money operation on an intent runs in three steps, as the ledger's own do:
//
//  1. claim: one transaction locks the intent, checks that its status allows the operation, and
//     records the operation as pending with the next attempt number and a lease. Two confirmations or
//     two captures racing for one intent: one claims it, the other is a 409.
//  2. the ledger: a transaction of the payments core whose idempotency key is derived from the intent
//     and the attempt number (attemptKey). The ledger records the attempt before it asks the processor,
//     and binds the key to it, so that doing the operation again under the same number finds that
//     transaction instead of charging again.
//  3. settle: one transaction records the outcome on the intent (transition), the end of the pending
//     operation, and the change (recordChange: the record and the event); a confirmation also deletes the sealed number of the payment
//     method it used.
//
// A node that dies between the steps leaves the operation pending. Once its lease has run out (twice
// the processor timeout, as for a ledger attempt) it is presumed dead, and the next request to the
// intent, or the sweep, settles it from the ledger: a resolved transaction is settled as above, one
// still pending waits for the ledger's recovery, and none at all (the node died before the ledger saw
// it) ends the claim with nothing charged.

// ConfirmParams are the parameters of a confirmation.
type ConfirmParams struct {
	// PaymentMethod is the payment method to pay with; "" for the one the intent has.
	PaymentMethod string
	// CVC, when the caller has it in memory in the same request (the hosted page), is handed to the
	// processor. It is never stored (PCI DSS 3.3.1): a confirmation that stops for a 3-D Secure
	// challenge drops it, and the charge that follows the challenge goes without it.
	CVC string
	// Source is the ledger's transaction_source: payment.SourceEcommerce from the v1 API,
	// payment.SourceHPP from the hosted page.
	Source string
	// Interactive says that the caller can show the cardholder the issuer's 3-D Secure challenge (the
	// hosted page). Then a card whose issuer requires one takes the intent to requires_action with
	// nothing charged, and CompleteChallenge charges it with the challenge's outcome. Without it (the
	// v1 API, where no cardholder is there) the card is charged without authentication, and the
	// processor declines it with authentication_required if its issuer requires a challenge.
	Interactive bool
	// MailOrder says that the card was given over the telephone or by mail to the merchant's staff
	// (the dashboard's virtual terminal): the processor is told so, and no 3-D Secure challenge is
	// asked for, whatever Interactive says — the cardholder is not there to pass one.
	MailOrder bool
	// OrderID is the merchant's order number, recorded on the ledger's transaction.
	OrderID string
}

// Confirm pays who's intent id with a payment method. The answer is the intent with its outcome: a
// decline is not an error but an intent back in requires_payment_method with last_payment_error; an
// interactive confirmation of a card that requires a 3-D Secure challenge is an intent in
// requires_action.
// A confirmation that a velocity limit refuses (Throttled) is a 429 before the intent is claimed.
func (s *Service) Confirm(ctx context.Context, who Who, id string, p ConfirmParams) (Intent, error) {
	if err := s.Throttled(who, id); err != nil {
		return Intent{}, err
	}
	var pm vault.Method
	in, err := s.claim(ctx, who, id, opConfirm, func(tx *store.Tx, in *Intent) (bool, error) {
		if in.Status != StatusRequiresPaymentMethod && in.Status != StatusRequiresConfirmation {
			return false, unexpected(*in, "confirm")
		}
		pmID := p.PaymentMethod
		if pmID == "" {
			pmID = in.PaymentMethod
		}
		if pmID == "" {
			return false, fault.Invalid("payment_method", "payment_method is required: payment intent %s has none", in.IntentID)
		}
		if in.PaymentMethod != "" && in.PaymentMethod != pmID {
			// A method an interrupted confirmation attached is replaced: nothing will charge it now.
			if err := vault.ConsumeMethod(ctx, tx, who.Merchant.ID, in.PaymentMethod, in.IntentID); err != nil {
				return false, err
			}
		}
		var err error
		if pm, err = s.vault.AttachMethod(ctx, tx, who.Merchant.ID, pmID, in.IntentID); err != nil {
			return false, err
		}
		in.PaymentMethod, in.Status = pmID, StatusProcessing
		return true, nil
	})
	if errors.Is(err, errAnswered) {
		return in, nil
	}
	if err != nil {
		return Intent{}, err
	}
	return s.charge(ctx, who, in, pm, p, processor.AuthenticationNone)
}

// Throttled returns the 429 of a confirmation of who's intent id that a velocity limit refuses now,
// reading only memory: the failed confirmations of the payment intent — its confirmations have been
// declined its quota of times within the hour — or the declines of who's credential, which the
// ledger would refuse anyway, after a claim to undo.
func (s *Service) Throttled(who Who, id string) error {
	return s.velocity.Check(who.Merchant.Velocity, velocity.IntentFailures(who.Merchant.ID, id), velocity.CredentialDeclines(who.Principal))
}

// charge is the ledger step of a claimed confirmation (or challenge completion) and its settling: a
// sale, or an authorization for manual capture, of the intent's amount on its payment method pm, with
// the cardholder's 3-D Secure outcome authentication. Before it, an interactive confirmation asks
// whether the card requires a challenge; if so, nothing is charged and the intent waits in
// requires_action (awaitChallenge).
func (s *Service) charge(ctx context.Context, who Who, in Intent, pm vault.Method, p ConfirmParams, authentication string) (Intent, error) {
	number, err := s.vault.OpenMethod(ctx, who.Merchant.ID, pm.ID)
	if err != nil {
		return s.afterFailure(ctx, who, in, err)
	}
	kind := payment.KindSale
	if in.CaptureMethod == CaptureManual {
		kind = payment.KindAuthorization
	}
	source := p.Source
	if source == "" {
		source = payment.SourceEcommerce
	}
	c := payment.Charge{Actor: who.actor(), Kind: kind, Amount: in.Amount, Currency: in.Currency, Card: number, Expiry: pm.Expiry,
		CVV: p.CVC, Authentication: authentication, Customer: customerOf(in, pm), Source: source,
		IdempotencyKey: attemptKey(in.IntentID, in.Attempts), MailOrder: p.MailOrder}
	c.Customer.OrderID = p.OrderID
	if p.Interactive && !p.MailOrder && authentication == processor.AuthenticationNone {
		required, err := s.ledger.ChallengeRequired(ctx, c)
		if err != nil {
			return s.afterFailure(ctx, who, in, err)
		}
		if required {
			return s.finishOp(ctx, in, who.ClientID, nil, awaitChallenge)
		}
	}
	t, err := s.ledger.Charge(ctx, c)
	if err != nil {
		return s.afterFailure(ctx, who, in, err)
	}
	out, err := s.settle(ctx, in, t, who.ClientID)
	if t.CardDeclined() {
		// Counted even when the client has gone, as the ledger counts the card's decline.
		if err := s.velocity.Record(context.WithoutCancel(ctx), who.Merchant.Velocity, velocity.IntentFailures(in.MerchantID, in.IntentID)); err != nil {
			s.log.ErrorContext(ctx, "count a failed confirmation against the velocity limits", "intent", in.IntentID, "err", err)
		}
	}
	out.Limit = t.Limit
	return out, err
}

// Capture collects amount (nil: all of amount_capturable) of who's intent in requires_capture.
func (s *Service) Capture(ctx context.Context, who Who, id string, amount *int64) (Intent, error) {
	var amt int64
	in, err := s.claim(ctx, who, id, opCapture, func(tx *store.Tx, in *Intent) (bool, error) {
		if in.Status != StatusRequiresCapture {
			return false, unexpected(*in, "capture")
		}
		amt = in.AmountCapturable
		if amount != nil {
			if *amount <= 0 || *amount > in.AmountCapturable {
				return false, fault.Invalid("amount_to_capture", "amount_to_capture must be a positive integer no greater than amount_capturable (%d)",
					in.AmountCapturable)
			}
			amt = *amount
		}
		return true, nil
	})
	if errors.Is(err, errAnswered) {
		return in, nil
	}
	if err != nil {
		return Intent{}, err
	}
	t, err := s.ledger.Capture(ctx, payment.FollowUp{Actor: who.actor(), ParentID: in.ChargeID, Amount: amt,
		IdempotencyKey: attemptKey(in.IntentID, in.Attempts)})
	if err != nil {
		return s.afterFailure(ctx, who, in, err)
	}
	return s.settle(ctx, in, t, who.ClientID)
}

// Cancellation reasons a client may give.
var cancellationReasons = []string{"duplicate", "fraudulent", "requested_by_customer", "abandoned"}

// Cancel cancels who's intent. One that holds an authorization (requires_capture) has it voided
// through the ledger first; one that holds no money is canceled at once.
func (s *Service) Cancel(ctx context.Context, who Who, id, reason string) (Intent, error) {
	now := time.UnixMilli(s.now().UnixMilli())
	in, err := s.claim(ctx, who, id, opCancel, func(tx *store.Tx, in *Intent) (bool, error) {
		switch in.Status {
		case StatusRequiresPaymentMethod, StatusRequiresConfirmation, StatusRequiresAction:
			// A method attached by a confirmation that did not charge it (one waiting for its 3-D Secure
			// challenge, or an interrupted one) is discarded with the intent: no number outlives its use.
			if in.PaymentMethod != "" {
				if err := vault.ConsumeMethod(ctx, tx, who.Merchant.ID, in.PaymentMethod, in.IntentID); err != nil {
					return false, err
				}
			}
			in.Status, in.CanceledAt, in.CancellationReason = StatusCanceled, now, reason
			return false, nil
		case StatusRequiresCapture:
			in.CancellationReason = reason
			return true, nil
		case StatusSucceeded:
			return false, refundInstead(*in)
		}
		return false, unexpected(*in, "cancel")
	})
	if errors.Is(err, errAnswered) {
		return in, nil
	}
	if err != nil || in.PendingOp == "" {
		return in, err
	}
	t, err := s.ledger.Void(ctx, payment.FollowUp{Actor: who.actor(), ParentID: in.ChargeID,
		IdempotencyKey: attemptKey(in.IntentID, in.Attempts)})
	if err != nil {
		return s.afterFailure(ctx, who, in, err)
	}
	return s.settle(ctx, in, t, who.ClientID)
}

// errStale ends a claim's transaction when it finds an operation presumed dead, to settle it first.
var errStale = errors.New("checkout: a pending operation's lease has run out")

// claim locks who's intent id and lets check decide, in the same transaction, whether op may run: it
// may change the intent, and says whether the operation needs the ledger. When it does, the intent is
// recorded with op pending under the next attempt number; otherwise the change is final (a cancel that
// holds no money) and recorded as it stands.
func (s *Service) claim(ctx context.Context, who Who, id, op string, check func(*store.Tx, *Intent) (bool, error)) (Intent, error) {
	request := opRequest(ctx, op)
	for range 2 {
		var in Intent
		err := s.db.Write(ctx, func(tx *store.Tx) error {
			now := s.now()
			var err error
			if in, err = lockIntent(ctx, tx, who.Merchant.ID, id, now); err != nil {
				return err
			}
			if in.stale(now) {
				return errStale
			}
			if request != "" && in.OpRequest == request && in.PendingOp == "" {
				return errAnswered
			}
			if in.PendingOp != "" {
				return unexpected(in, op)
			}
			before := in
			if request != "" {
				in.OpRequest = request
			}
			ledger, err := check(tx, &in)
			if err != nil {
				return err
			}
			in.UpdatedAt = time.UnixMilli(now.UnixMilli())
			if ledger {
				in.Attempts++
				in.PendingOp, in.LeaseUntil = op, time.UnixMilli(now.Add(s.lease).UnixMilli())
			}
			var c change // a claim for the ledger is a step, recorded by the operation's finish
			if !ledger {
				c = change{op: "payment_intent." + op, clientID: who.ClientID, requestID: who.RequestID}
			}
			return saveIntent(ctx, tx, before, in, c)
		})
		if !errors.Is(err, errStale) {
			return in, err
		}
		if _, err := s.reconcile(ctx, in); err != nil {
			return Intent{}, err
		}
	}
	return Intent{}, fault.Busy("operation_in_progress", "An operation on payment intent %s is in progress; retry shortly.", clip(id))
}

// errAnswered is claim's answer to a retry of the request whose operation the intent already
// settled: the caller answers with the intent as it stands.
var errAnswered = errors.New("checkout: the operation of this request is done")

// opRequest is what an intent remembers of the request claiming op: the operation and the request's
// Idempotency-Key, as scoped to its credential; "" without a key, or for a refund, which is an object
// of its own that remembers its key itself. A client whose node died after settling the operation and
// before answering retries with the same key after the HTTP layer has given up the first answer
// (the reliability drill saw it: such a retry of a confirmation was answered 409 "its status is
// succeeded"); the retry is answered with the intent instead, as the first attempt would have been,
// and nothing runs again.
func opRequest(ctx context.Context, op string) string {
	key := idempotency.Key(ctx)
	if key == "" || op == opRefund {
		return ""
	}
	return op + " " + key
}

// afterFailure handles an operation whose ledger step failed or never ran, from what the ledger holds
// under its attempt key: nothing (the claim is released, nothing was charged), a pending attempt (left
// for the ledger's recovery; the intent settles later), or an outcome after all (settled). The cause is
// returned unless there is an outcome.
func (s *Service) afterFailure(ctx context.Context, who Who, in Intent, cause error) (Intent, error) {
	ctx = context.WithoutCancel(ctx)
	t, found, err := s.ledger.ByKey(ctx, in.MerchantID, attemptKey(in.IntentID, in.Attempts))
	switch {
	case err != nil:
		s.log.ErrorContext(ctx, "look up an attempt after a failure", "intent", in.IntentID, "err", err)
		return Intent{}, cause
	case !found:
		if _, err := s.release(ctx, in, who.ClientID); err != nil {
			s.log.ErrorContext(ctx, "release a failed operation", "intent", in.IntentID, "err", err)
		}
		return Intent{}, cause
	case t.Status == payment.StatusPending:
		return Intent{}, cause
	}
	return s.settle(ctx, in, t, who.ClientID)
}

// reconcile settles the pending operation of in from its ledger transaction: resolved, it is settled;
// still pending, the answer is a 409 until the ledger's recovery resolves it; absent, the operation
// never reached the ledger and its claim is released with nothing charged.
func (s *Service) reconcile(ctx context.Context, in Intent) (Intent, error) {
	if in.PendingOp == "" {
		return in, nil
	}
	ctx = context.WithoutCancel(ctx)
	t, found, err := s.ledger.ByKey(ctx, in.MerchantID, attemptKey(in.IntentID, in.Attempts))
	switch {
	case err != nil:
		return Intent{}, err
	case !found:
		return s.release(ctx, in, "")
	case t.Status == payment.StatusPending:
		return in, fault.Busy("operation_in_progress", "The %s of payment intent %s awaits the processor's answer; retry shortly.", in.PendingOp, in.IntentID)
	}
	return s.settle(ctx, in, t, "")
}

// settleAbandoned settles the operations whose lease has run out, and returns how many it settled.
func (s *Service) settleAbandoned(ctx context.Context) (int, error) {
	var stale []Intent
	err := s.db.Read(ctx, func(q store.Querier) error {
		var err error
		stale, err = queryIntents(ctx, q, `WHERE pending_op IS NOT NULL AND lease_until <= $1 ORDER BY lease_until LIMIT 100`,
			s.now().UnixMilli())
		return err
	})
	n := 0
	for _, in := range stale {
		var f *fault.Error
		if _, err := s.reconcile(ctx, in); err != nil && !errors.As(err, &f) {
			return n, err
		}
		n++
	}
	return n, err
}

// settle records the outcome t of the operation pending on in, unless another request settled it
// first; either way it returns the intent as it now stands.
func (s *Service) settle(ctx context.Context, in Intent, t payment.Transaction, clientID string) (Intent, error) {
	return s.finishOp(ctx, in, clientID, &t, func(cur Intent, now time.Time) Intent { return transition(cur, t, now) })
}

// release ends the pending operation of in without an outcome: nothing reached the ledger.
func (s *Service) release(ctx context.Context, in Intent, clientID string) (Intent, error) {
	return s.finishOp(ctx, in, clientID, nil, func(cur Intent, _ time.Time) Intent {
		switch {
		case cur.Status != StatusProcessing:
		case cur.PendingOp == opChallenge:
			cur.Status = StatusRequiresAction // the challenge's outcome can be given again
		default:
			cur.Status = StatusRequiresConfirmation // the payment method stays attached to this intent
		}
		if cur.PendingOp == opCancel {
			cur.CancellationReason = ""
		}
		cur.PendingOp, cur.LeaseUntil = "", time.Time{}
		return cur
	})
}

// finishOp applies next to the intent in one transaction if the operation pending on in is still the
// one pending (same operation, same attempt), recording the change with its record naming clientID
// (the API key that asked, or "" for the sweep), and, after a charge with an outcome (a confirmation's or a challenge
// completion's), deletes the sealed number of the payment method it used. A confirmation that waits for
// a 3-D Secure challenge has no outcome yet: the method keeps its number for the charge to come. A
// refund records on its refund the outcome t of its ledger transaction (nil: none, it never reached
// the ledger) in the same transaction (finishRefund).
func (s *Service) finishOp(ctx context.Context, in Intent, clientID string, t *payment.Transaction, next func(Intent, time.Time) Intent) (Intent, error) {
	ctx = context.WithoutCancel(ctx) // the outcome must be recorded once the money has moved
	var out Intent
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		now := time.UnixMilli(s.now().UnixMilli())
		cur, err := lockIntent(ctx, tx, in.MerchantID, in.IntentID, now)
		if err != nil {
			return err
		}
		if cur.PendingOp != in.PendingOp || cur.Attempts != in.Attempts {
			out = cur // settled already
			return nil
		}
		out = next(cur, now)
		out.UpdatedAt = now
		c := change{op: "payment_intent." + cur.PendingOp, clientID: clientID, requestID: httpapi.RequestID(ctx), txID: out.LatestCharge,
			amount: cur.Amount, amountSet: true}
		if cur.PendingOp == opRefund {
			if c.txID, c.amount, c.typ, err = finishRefund(ctx, tx, cur, t, now); err != nil {
				return err
			}
		}
		if err := saveIntent(ctx, tx, cur, out, c); err != nil {
			return err
		}
		if (cur.PendingOp == opConfirm || cur.PendingOp == opChallenge) && out.LatestCharge != cur.LatestCharge {
			if err := vault.ConsumeMethod(ctx, tx, cur.MerchantID, cur.PaymentMethod, cur.IntentID); err != nil {
				return err
			}
		}
		if t != nil && out.Status == StatusSucceeded && cur.Status != StatusSucceeded && (cur.PendingOp == opConfirm || cur.PendingOp == opChallenge) {
			for _, f := range s.succeeded {
				if err := f(ctx, tx, out, *t); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return out, err
}

// transition is the state machine's step for the outcome t of the operation pending on in: a pure
// function of the intent and the ledger's answer. A confirmation and a challenge completion end alike:
// the charge decides. (A confirmation that stops for a 3-D Secure challenge has no ledger answer; its
// step is awaitChallenge.)
func transition(in Intent, t payment.Transaction, now time.Time) Intent {
	approved := t.Status == payment.StatusApproved
	op := in.PendingOp
	in.PendingOp, in.LeaseUntil = "", time.Time{}
	switch op {
	case opConfirm, opChallenge:
		in.ChargeID, in.LatestCharge = t.ID, t.TransactionID
		switch {
		case approved && t.Kind == payment.KindSale:
			in.Status, in.AmountReceived, in.LastError = StatusSucceeded, t.Amount, nil
		case approved:
			in.Status, in.AmountCapturable, in.LastError = StatusRequiresCapture, t.Amount, nil
		default:
			// "A decline returns the intent to requires_payment_method with last_payment_error": the
			// payment method is used up; the customer tries again with another.
			in.Status, in.PaymentMethod, in.LastError = StatusRequiresPaymentMethod, "", declineError(t)
		}
	case opCapture:
		if approved {
			// The intent's latest_charge is the transaction that captured the money: the capture,
			// which refunds act on.
			in.Status, in.AmountReceived, in.AmountCapturable, in.LastError = StatusSucceeded, t.Amount, 0, nil
			in.ChargeID, in.LatestCharge = t.ID, t.TransactionID
		} else {
			in.LastError = declineError(t) // still requires_capture
		}
	case opCancel:
		if approved {
			in.Status, in.AmountCapturable, in.CanceledAt = StatusCanceled, 0, now
		} else {
			in.LastError, in.CancellationReason = declineError(t), "" // still requires_capture
		}
	case opRefund:
		// The intent keeps its status; amount_refunded is read from the ledger, and the refund records
		// the outcome (finishRefund).
	}
	return in
}

// declineError is last_payment_error for a declined transaction: code as the industry standard names
// it, decline_code the processor's reason.
func declineError(t payment.Transaction) *PaymentError {
	e := &PaymentError{Code: "card_declined", DeclineCode: t.DeclineCode, Message: t.Message}
	switch t.DeclineCode {
	case processor.CodeDeclined, "":
		e.DeclineCode = "generic_decline"
	case processor.CodeExpiredCard:
		e.Code = "expired_card"
	case processor.CodeIncorrectCVC:
		e.Code = "incorrect_cvc"
	case processor.CodeProcessingError:
		e.Code = "processing_error"
	case processor.CodeAuthorizationExpired:
		e.Code = "charge_expired_for_capture"
	case processor.CodeAuthenticationRequired, processor.CodeAuthenticationFailed:
		e.Code = t.DeclineCode // 3-D Secure: the card was not authenticated, or failed its challenge
	case velocity.DeclineCode:
		e.Code = t.DeclineCode // the card's velocity limit declined it; the processor never saw it
	}
	return e
}

// customerOf is the customer detail the ledger records for a confirmation: the billing details of the
// payment method, the intent's receipt e-mail (else the billing e-mail) and description.
func customerOf(in Intent, pm vault.Method) payment.Customer {
	b := pm.Billing
	email := in.ReceiptEmail
	if email == "" {
		email = b.Email
	}
	return payment.Customer{Email: email, Telephone: b.Phone, Address1: b.Line1, Address2: b.Line2, City: b.City,
		Province: b.State, Country: b.Country, PostalCode: b.PostalCode, Description: in.Description}
}
