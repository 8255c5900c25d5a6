package invoice

import (
	"context"
	"encoding/json"
	"time"

	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/store"
)

// Invoice events: invoice.created, .sent, .paid, .overdue and .canceled, each written in the same
// database transaction as the change it reports, with the invoice as the API would show it at that
// moment. Beside those five: invoice.updated (a PUT that
// changed what the API shows), invoice.deleted (a draft deleted, as last shown) and
// invoice.reminder_sent (each reminder the billing engine e-mailed), so that a merchant's system that
// keeps its own copy of the invoices can follow every change without polling.

// record writes the event typ about inv, as the API shows it now but for its links (Invoice.data), in
// tx: the transaction of the change it reports, with its webhook deliveries.
func (s *Service) record(ctx context.Context, tx *store.Tx, typ string, inv Invoice, at time.Time) error {
	return event.Record(ctx, tx, inv.MerchantID, typ, inv.data(), at)
}

// shown is inv as its events show it, but for updated_at: an update after which it is shown alike
// changed nothing a receiver of its events can see, and records no event.
func (s *Service) shown(inv Invoice) string {
	w := inv.data()
	w.UpdatedAt = 0
	b, _ := json.Marshal(w)
	return string(b)
}
