package checkout

import (
	"context"
	"errors"
	"time"

	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/vault"
)

// 3-D Secure on payment intents. An interactive confirmation (the hosted page) asks the processor
// whether the card's issuer requires a challenge (processor.Authenticator); if so the intent waits in
// requires_action, nothing charged, its payment method attached with its sealed number, and no
// operation pending. The hosted page shows the challenge and reports its outcome with
// CompleteChallenge, which charges the card through the ledger with that outcome, as a confirmation
// does (claim, ledger, settle; see operation.go). A failed challenge is a decline like any other: a
// DECLINED transaction in the ledger, and the intent back in requires_payment_method.

// ChallengeLifetime is how long an intent waits in requires_action for the outcome of its 3-D Secure
// challenge. After it the sweep ends the challenge: the intent returns to requires_payment_method
// with last_payment_error authentication_required, and the payment method's number is deleted.
const ChallengeLifetime = 15 * time.Minute

// CompleteChallenge records the outcome of the cardholder's 3-D Secure challenge on who's intent id,
// which must be in requires_action (else a 409), and charges the attached payment method through the
// ledger with it, as a confirmation does. Passed, the processor decides as for any payment: succeeded,
// or requires_capture for manual capture. Failed, the processor declines it (processor.Authenticator:
// "a payment whose authentication failed is declined with CodeAuthenticationFailed"), and the intent
// returns to requires_payment_method with last_payment_error authentication_failed. source is the
// ledger's transaction_source (payment.SourceHPP from the hosted page). The charge goes without the
// CVC, which is never stored (PCI DSS 3.3.1).
func (s *Service) CompleteChallenge(ctx context.Context, who Who, id string, passed bool, source string) (Intent, error) {
	var pm vault.Method
	in, err := s.claim(ctx, who, id, opChallenge, func(tx *store.Tx, in *Intent) (bool, error) {
		if in.Status != StatusRequiresAction {
			return false, unexpected(*in, "complete the 3-D Secure challenge of")
		}
		var err error
		if pm, err = s.vault.CheckMethod(ctx, tx, who.Merchant.ID, in.PaymentMethod, in.IntentID); err != nil {
			return false, err
		}
		in.Status = StatusProcessing
		return true, nil
	})
	if errors.Is(err, errAnswered) {
		return in, nil
	}
	if err != nil {
		return Intent{}, err
	}
	outcome := processor.AuthenticationFailed
	if passed {
		outcome = processor.AuthenticationSucceeded
	}
	return s.charge(ctx, who, in, pm, ConfirmParams{Source: source}, outcome)
}

// awaitChallenge is the step of a confirmation whose card requires a 3-D Secure challenge: the intent
// waits in requires_action with no operation pending and no money held. Its payment method stays
// attached, its number kept for the charge that follows the challenge.
func awaitChallenge(in Intent, _ time.Time) Intent {
	in.Status, in.LastError = StatusRequiresAction, nil
	in.PendingOp, in.LeaseUntil = "", time.Time{}
	return in
}

// expireChallenges ends the challenges that waited ChallengeLifetime without an outcome (the customer
// left): each intent returns to requires_payment_method with last_payment_error
// authentication_required, and its payment method's sealed number is deleted, so that no card number
// outlives its use.
func (s *Service) expireChallenges(ctx context.Context) error {
	cutoff := s.now().Add(-ChallengeLifetime).UnixMilli()
	type ref struct {
		id                   int64
		merchantID, intentID string
	}
	var due []ref
	err := s.db.Read(ctx, func(q store.Querier) error {
		// The literal status lets PostgreSQL use the partial index payment_intents_action.
		rows, err := q.QueryContext(ctx, `SELECT id, merchant_id, intent_id FROM payment_intents
			WHERE status = 'requires_action' AND updated_at <= $1 ORDER BY updated_at LIMIT 100`, cutoff)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r ref
			if err := rows.Scan(&r.id, &r.merchantID, &r.intentID); err != nil {
				return err
			}
			due = append(due, r)
		}
		return rows.Err()
	})
	if err != nil {
		return err
	}
	for _, r := range due {
		err := s.db.Write(ctx, func(tx *store.Tx) error {
			now := time.UnixMilli(s.now().UnixMilli())
			// Lock the intent only if it still waits, untouched since the cutoff: a challenge completed
			// or an intent canceled meanwhile is left alone.
			res, err := tx.ExecContext(ctx, `UPDATE payment_intents SET updated_at = $2 WHERE id = $1 AND status = 'requires_action'
				AND pending_op IS NULL AND updated_at <= $3`, r.id, now.UnixMilli(), cutoff)
			if err != nil {
				return err
			}
			if k, _ := res.RowsAffected(); k == 0 {
				return nil
			}
			in, err := getIntent(ctx, tx, r.merchantID, r.intentID)
			if err != nil {
				return err
			}
			if err := vault.ConsumeMethod(ctx, tx, in.MerchantID, in.PaymentMethod, in.IntentID); err != nil {
				return err
			}
			before := in
			in.Status, in.PaymentMethod, in.UpdatedAt = StatusRequiresPaymentMethod, "", now
			in.LastError = &PaymentError{Code: "authentication_required", DeclineCode: "authentication_required",
				Message: "The 3-D Secure challenge was not completed in time."}
			return saveIntent(ctx, tx, before, in, change{op: "payment_intent.challenge_expired"})
		})
		if err != nil {
			return err
		}
	}
	return nil
}
