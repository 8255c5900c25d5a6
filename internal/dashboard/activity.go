package dashboard

import (
	"context"
	"time"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/store"
)

// record writes, in tx, the audit record of a dashboard action: op on resource (a "user/<id>", or ""
// for the merchant's own settings or the user's session) with detail, in the name of the staff user
// and address of ctx (audit.WithActor) — "every dashboard action writes an audit record naming the
// staff user" (issue 16, point 5).
func record(ctx context.Context, tx *store.Tx, merchantID, op, resource, detail string, at time.Time) error {
	return audit.Write(ctx, tx, audit.Record{MerchantID: merchantID, Operation: op, Resource: resource, Outcome: audit.Done,
		Detail: detail, RequestID: httpapi.RequestID(ctx), At: at})
}

// recordAlone writes the audit record of an action that committed in a transaction of its own.
func (h *Handler) recordAlone(ctx context.Context, merchantID, op string) error {
	return h.cfg.DB.Write(ctx, func(tx *store.Tx) error { return record(ctx, tx, merchantID, op, "", "", h.cfg.Now()) })
}
