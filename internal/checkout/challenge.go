package checkout

import (
	"context"
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
