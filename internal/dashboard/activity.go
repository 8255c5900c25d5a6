package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/user"
)

// record writes, in tx, the audit record of a dashboard action: op on resource (a "user/<id>", or ""
// for the merchant's own settings or the user's session) with detail, in the name of the staff user
// and address of ctx (audit.WithActor): every dashboard action writes an audit record naming the
// staff user.
func record(ctx context.Context, tx *store.Tx, merchantID, op, resource, detail string, at time.Time) error {
	return audit.Write(ctx, tx, audit.Record{MerchantID: merchantID, Operation: op, Resource: resource, Outcome: audit.Done,
		Detail: detail, RequestID: httpapi.RequestID(ctx), At: at})
}

// actor returns ctx naming user id, acting from r's client address, as the user of what is recorded
// under it (audit.WithActor).
func (h *Handler) actor(ctx context.Context, r *http.Request, id string) context.Context {
	return audit.WithActor(ctx, audit.Actor{UserID: id, Address: h.cfg.Proxies.ClientAddr(r).String()})
}

// recordAlone writes the audit record of an action that committed in a transaction of its own.
func (h *Handler) recordAlone(ctx context.Context, merchantID, op string) error {
	return h.cfg.DB.Write(ctx, func(tx *store.Tx) error { return record(ctx, tx, merchantID, op, "", "", h.cfg.Now()) })
}

// activityRow is one record on the Activity page.
type activityRow struct {
	When, Who, What, Outcome, From string
}

// activityFilter is the Activity page's form: the staff to choose from, and what is chosen.
type activityFilter struct {
	Staff        []user.User
	User, Action string
	Older        string // the query of the next page
}

// activity serves the Activity page: the merchant's audit log, newest first, a page at a time, each
// record saying who did what, when and from which address, filtered by staff user and by action. A
// sales user sees only its own records, as it sees only its own transactions.
func (h *Handler) activity(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	q := r.URL.Query()
	f := audit.Filter{UserID: q.Get("user"), Operation: strings.TrimSpace(q.Get("action"))}
	if sess.Role == user.Sales {
		f.UserID = sess.UserID
	}
	if before, err := strconv.ParseInt(q.Get("before"), 10, 64); err == nil && before > 0 {
		f.Before = before
	}
	m, err := h.cfg.Merchants.Get(r.Context(), sess.MerchantID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	loc := m.Location()
	v := view{Title: "Activity", Activity: &activityFilter{User: f.UserID, Action: f.Operation}}
	var entries []audit.Entry
	var emails map[string]string
	err = h.cfg.DB.Read(r.Context(), func(qr store.Querier) error {
		staff, err := user.List(r.Context(), qr, sess.MerchantID)
		if err != nil {
			return err
		}
		emails = emailsOf(staff)
		if sess.Role != user.Sales {
			v.Activity.Staff = staff
		}
		entries, err = audit.List(r.Context(), qr, sess.MerchantID, f)
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v.Rows = activityRows(entries, emails, loc)
	page := url.Values{}
	if f.UserID != "" && sess.Role != user.Sales {
		page.Set("user", f.UserID)
	}
	if f.Operation != "" {
		page.Set("action", f.Operation)
	}
	if len(entries) == audit.DefaultLimit {
		page.Set("before", strconv.FormatInt(entries[len(entries)-1].ID, 10))
		v.Activity.Older = page.Encode()
	}
	h.render(w, r, http.StatusOK, "activity", v)
}

// emailsOf maps staff users' ids to their e-mails.
func emailsOf(staff []user.User) map[string]string {
	out := make(map[string]string, len(staff))
	for _, u := range staff {
		out[u.ID] = u.Email
	}
	return out
}

// activityRows are audit records as the pages show them, times in loc, users by e-mail (emails).
func activityRows(entries []audit.Entry, emails map[string]string, loc *time.Location) []activityRow {
	var out []activityRow
	for _, e := range entries {
		out = append(out, activityRow{When: e.At.In(loc).Format("2006-01-02 15:04:05 MST"), Who: who(e, emails),
			What: what(e), Outcome: strings.ToLower(e.Outcome), From: e.Address})
	}
	return out
}

// who names whoever a record is of: a staff user by e-mail (or id, once removed), an API client, or
// Kassa itself (recovery, billing).
func who(e audit.Entry, emails map[string]string) string {
	switch {
	case e.UserID != "" && emails[e.UserID] != "":
		return emails[e.UserID]
	case e.UserID != "":
		return "user " + e.UserID + " (removed)"
	case e.ClientID != "":
		return "API client " + e.ClientID
	}
	return "Kassa"
}

// what says what a record did, in a line: the operation, what it acted on, and its detail or amount.
func what(e audit.Entry) string {
	parts := []string{e.Operation}
	for _, s := range []string{e.TransactionID, e.Resource} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	if c, ok := money.Lookup(e.Currency); ok {
		parts = append(parts, money.Format(e.Amount, c)+" "+c.Code)
	}
	if e.Detail != "" {
		parts = append(parts, "("+e.Detail+")")
	}
	return strings.Join(parts, " ")
}
