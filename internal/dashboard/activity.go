package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/history"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/user"

	"golang.org/x/text/language"
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

// activityRow is one entry of the history on the Activity page or a transaction's trail: What is
// the operation, Transaction the transaction it acted on (linked), Rest what else it names.
type activityRow struct {
	When, Who, What, Transaction, Rest, Outcome, From string
}

// activityFilter is the Activity page's form: the staff to choose from, and what is chosen.
type activityFilter struct {
	Staff        []user.User
	User, Action string
	Older        string       // the query of the next page
	Export       string       // the query of the CSV export of the filter
	Chips        []filterChip // the filters applied, each removable
}

// activityFilters are the Activity page's filters as its chips name them.
var activityFilters = []filterParam{{"user", "Staff"}, {"action", "Action"}}

// activityQuery reads the Activity page's filter from its query (user, action, before): the
// history's filter, and the error of a cursor that no page gave. A sales user's is its own records.
func activityQuery(sess user.Session, q url.Values) (history.Filter, *fault.Error) {
	f := history.Filter{UserID: q.Get("user"), Operation: strings.TrimSpace(q.Get("action"))}
	if sess.Role == user.Sales {
		f.UserID = sess.UserID
	}
	before, err := history.ParseCursor(q.Get("before"))
	if err != nil {
		return f, fault.Invalid("before", "The link to older activity is not one this page gave; start again from the newest.")
	}
	f.Before = before
	return f, nil
}

// activityValues is the query of f as the page's links carry it, without a cursor.
func activityValues(sess user.Session, f history.Filter) url.Values {
	v := url.Values{}
	if f.UserID != "" && sess.Role != user.Sales {
		v.Set("user", f.UserID)
	}
	if f.Operation != "" {
		v.Set("action", f.Operation)
	}
	return v
}

// activity serves the Activity page: the merchant's history (internal/history: the audit log's
// records and the ledger rows that are their operations' records), newest first, a page at a time,
// each entry saying who did what, when and from which address, filtered by staff user and by
// action. A sales user sees only its own records, as it sees only its own transactions.
func (h *Handler) activity(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	f, bad := activityQuery(sess, r.URL.Query())
	m, err := h.cfg.Merchants.Get(r.Context(), sess.MerchantID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	loc := m.Location()
	v := view{Title: "Activity", Activity: &activityFilter{User: f.UserID, Action: f.Operation}}
	var page history.Page
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
		if bad != nil {
			return nil
		}
		page, err = history.List(r.Context(), qr, sess.MerchantID, f)
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	query := activityValues(sess, f)
	v.Activity.Export = query.Encode()
	v.Activity.Chips = chipsOf("/dashboard/activity", query, activityFilters, func(name, value string) string {
		if name == "user" && emails[value] != "" {
			return emails[value]
		}
		return value
	})
	if bad != nil {
		v.Error = bad.Message
		h.render(w, r, http.StatusBadRequest, "activity", v)
		return
	}
	v.Rows = activityRows(page.Entries, emails, loc, m.Language())
	if page.More {
		query.Set("before", page.Next.String())
		v.Activity.Older = query.Encode()
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

// activityRows are history entries as the pages show them, times in loc, amounts in lang, users by
// e-mail (emails).
func activityRows(entries []history.Entry, emails map[string]string, loc *time.Location, lang language.Tag) []activityRow {
	var out []activityRow
	for _, e := range entries {
		out = append(out, activityRow{When: e.At.In(loc).Format("2006-01-02 15:04:05 MST"), Who: who(e.Record, emails),
			What: e.Operation, Transaction: e.TransactionID, Rest: rest(e.Record, lang), Outcome: strings.ToLower(e.Outcome), From: e.Address})
	}
	return out
}

// who names whoever a record is of: a staff user by e-mail (or id, once removed), an API client (or
// partner, API key: the credential the ledger recorded), or Kassa itself (recovery, billing).
func who(e audit.Record, emails map[string]string) string {
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

// rest says what else a record names after its operation and transaction, in a line: the vault
// record or setting it acted on, and its amount (in lang) and detail.
func rest(e audit.Record, lang language.Tag) string {
	var parts []string
	if e.Resource != "" {
		parts = append(parts, e.Resource)
	}
	if c, ok := money.Lookup(e.Currency); ok {
		parts = append(parts, money.Display(e.Amount, c, lang))
	}
	if e.Detail != "" {
		parts = append(parts, "("+e.Detail+")")
	}
	return strings.Join(parts, " ")
}
