package dashboard

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/invoice"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/user"
)

// The search box of the header: one query finds a transaction by its id, its order id or its card's
// last 4, a customer by the beginning of its e-mail or name, an invoice by its number or its
// customer's e-mail. A query that is exactly the id of one of the merchant's objects opens its page
// (303); any other shows what it found, grouped by kind, each group a few rows with a link to the
// list filtered by the query where the list has that filter. A role finds only the kinds of objects
// whose pages it may open (sales staff: their own transactions), and never another merchant's: an
// id of another merchant's object is answered as an id of none. Every match is read through an index
// that begins with the merchant and the value, up to a group's rows, so a search costs the same on a
// ledger of 100 transactions as of 10,000,000: no text is searched for inside another.

const searchPath = "/dashboard/search"

// searchGroup is how many rows a group of the results shows; searchMax how many characters a query
// may have (more is no id, number or name anyone types).
const (
	searchGroup = 10
	searchMax   = 200
)

// lookupID is the form of the vault's, the billing's and the invoices' ids (customers, plans,
// subscriptions, invoices): ten characters of base 32.
var lookupID = regexp.MustCompile(`^[A-Z2-7]{10}$`)

// searchView is the results page.
type searchView struct {
	Q      string
	Groups []searchGroupView
	Empty  *emptyState
}

// searchGroupView is one kind of object found: its rows, each a link to its page, and the links to
// the lists filtered by the query.
type searchGroupView struct {
	ID, Heading string
	Rows        []searchRow
	// More: the group shows its first searchGroup rows of more.
	More   bool
	SeeAll []link
}

// searchRow is an object found: what names it, and what tells it apart.
type searchRow struct {
	Href, Title, Detail string
}

// parseSearch reads the query of the search box: trimmed, text, and not empty nor longer than
// searchMax characters; otherwise the message that says what is wrong with it.
func parseSearch(raw string) (string, string) {
	q := strings.TrimSpace(raw)
	switch {
	case !httpapi.Storable(q):
		return "", "Search must be text."
	case q == "":
		return "", "Search: type a transaction or order ID, a card's last 4 digits, a customer's e-mail or name, or an invoice number."
	case utf8.RuneCountInString(q) > searchMax:
		return "", "Search must be at most 200 characters."
	}
	return q, ""
}

// mayOpen reports whether role may open the pages of a section open to roles.
func mayOpen(role user.Role, roles []user.Role) bool { return slices.Contains(roles, role) }

// searchPage serves the search box's query: the page of the object it is the id of, or the results.
func (h *Handler) searchPage(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	q, msg := parseSearch(r.URL.Query().Get("q"))
	sv := &searchView{Q: q}
	v := view{Title: "Search", Data: sv, Search: q}
	if msg != "" {
		if raw := r.URL.Query().Get("q"); httpapi.Storable(raw) {
			v.Search = raw // shown again in the box, to be corrected
		}
		v.Error = msg
		h.render(w, r, http.StatusBadRequest, "search", v)
		return
	}
	v.Title = "Search: " + q
	m, err := h.cfg.Merchants.Get(r.Context(), sess.MerchantID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if page, err := h.exactObject(r.Context(), sess, strings.ToUpper(q)); err != nil {
		h.fail(w, r, err)
		return
	} else if page != "" {
		http.Redirect(w, r, page, http.StatusSeeOther)
		return
	}
	loc := m.Location()
	if mayOpen(sess.Role, listers) {
		g, err := h.searchTransactions(r.Context(), sess, q)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		for _, t := range g.found {
			g.Rows = append(g.Rows, searchRow{Href: transactionsPath + "/" + t.TransactionID, Title: t.TransactionID,
				Detail: strings.Join(nonEmpty(t.CreatedAt.In(loc).Format("2006-01-02 15:04"), t.Kind, t.Status,
					money.Display(t.Amount, t.Currency, m.Language()), cardShown(t), customerOf(t), orderOf(t)), " · ")})
		}
		sv.add(g.searchGroupView)
	}
	if mayOpen(sess.Role, readers) {
		list, more, err := h.cfg.Vault.SearchCustomers(r.Context(), m.ID, q, searchGroup)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		g := searchGroupView{ID: "search-customers", Heading: "Customers", More: more}
		for _, c := range list {
			g.Rows = append(g.Rows, searchRow{Href: customersPath + "/" + c.LookupID, Title: fullName(c),
				Detail: strings.Join(nonEmpty(c.Email, c.Company, c.LookupID), " · ")})
		}
		sv.add(g)
		ig, err := h.searchInvoices(r.Context(), m, q)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		sv.add(ig)
	}
	if len(sv.Groups) == 0 {
		sv.Empty = &emptyState{ID: "search-empty", Heading: "Nothing found",
			About: "Nothing you may open matches “" + q + "”. Search by a transaction or order ID, a card's last 4 digits, " +
				"the beginning of a customer's e-mail or name, or an invoice number."}
	}
	h.render(w, r, http.StatusOK, "search", v)
}

// add adds g to the results when it found anything.
func (sv *searchView) add(g searchGroupView) {
	if len(g.Rows) > 0 {
		sv.Groups = append(sv.Groups, g)
	}
}

// nonEmpty is parts without the empty ones.
func nonEmpty(parts ...string) []string {
	return slices.DeleteFunc(parts, func(s string) bool { return s == "" })
}

// orderOf names a transaction's order, if it has one.
func orderOf(t payment.Transaction) string {
	if t.OrderID == "" {
		return ""
	}
	return "order " + t.OrderID
}

// exactObject is the page of the merchant's object whose id is id (upper-cased), among the kinds
// sess's role may open, or "" when there is none: a transaction (sales staff: one they made), a
// customer, an invoice, a plan or a subscription. Each is read by its unique id and the merchant, so
// another merchant's is none.
func (h *Handler) exactObject(ctx context.Context, sess user.Session, id string) (string, error) {
	switch {
	case txID.MatchString(id) && mayOpen(sess.Role, listers):
		t, err := h.cfg.Ledger.Get(ctx, sess.MerchantID, id)
		var fe *fault.Error
		if errors.As(err, &fe) && fe.Status == http.StatusNotFound || err == nil && sess.Role == user.Sales && t.ClientID != clientOf(sess.UserID) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		return transactionsPath + "/" + t.TransactionID, nil
	case lookupID.MatchString(id) && mayOpen(sess.Role, readers):
		var page string
		err := h.cfg.DB.Read(ctx, func(q store.Querier) error {
			for _, k := range []struct{ stmt, path string }{
				{`SELECT lookup_id FROM customers WHERE lookup_id = $1 AND merchant_id = $2`, customersPath + "/"},
				{`SELECT lookup_id FROM invoices WHERE lookup_id = $1 AND merchant_id = $2`, invoicesPath + "/"},
				{`SELECT lookup_id FROM plans WHERE lookup_id = $1 AND merchant_id = $2 AND deleted_at IS NULL`, "/dashboard/plans/"},
				{`SELECT c.lookup_id || '/' || s.lookup_id FROM subscriptions s JOIN customers c ON c.id = s.customer_id
					WHERE s.lookup_id = $1 AND s.merchant_id = $2`, "/dashboard/subscriptions/"},
			} {
				var found string
				err := q.QueryRowContext(ctx, k.stmt, id, sess.MerchantID).Scan(&found)
				if errors.Is(err, sql.ErrNoRows) {
					continue
				} else if err != nil {
					return err
				}
				page = k.path + found
				return nil
			}
			return nil
		})
		return page, err
	}
	return "", nil
}

// foundTransactions is the Transactions group and the transactions it shows.
type foundTransactions struct {
	searchGroupView
	found []payment.Transaction
}

// searchTransactions finds the transactions of q that sess may see, newest first: those of the order
// q, of the cards ending in q (four digits) and of the customer e-mail q (it has an @), each matched
// whole through its index; a "see all" link for each filter that found some.
func (h *Handler) searchTransactions(ctx context.Context, sess user.Session, q string) (foundTransactions, error) {
	g := foundTransactions{searchGroupView: searchGroupView{ID: "search-transactions", Heading: "Transactions"}}
	type by struct {
		f           payment.Filter
		param, says string
	}
	bys := []by{{payment.Filter{OrderID: q}, "order", "with order ID " + q}}
	if fourDigits.MatchString(q) {
		bys = append(bys, by{payment.Filter{CardSuffix: q}, "last4", "with a card ending in " + q})
	}
	if strings.Contains(q, "@") {
		bys = append(bys, by{payment.Filter{Email: q}, "email", "of the customer e-mail " + q})
	}
	seen := map[int64]bool{}
	for _, b := range bys {
		b.f.Limit = searchGroup + 1
		scope(sess, &b.f)
		p, err := h.cfg.Ledger.List(ctx, sess.MerchantID, b.f)
		if err != nil {
			return g, err
		}
		if len(p.Transactions) == 0 {
			continue
		}
		g.More = g.More || len(p.Transactions) > searchGroup
		g.SeeAll = append(g.SeeAll, link{"All transactions " + b.says, transactionsPath + "?" + url.Values{b.param: {q}}.Encode()})
		for _, t := range p.Transactions[:min(len(p.Transactions), searchGroup)] {
			if !seen[t.ID] {
				seen[t.ID] = true
				g.found = append(g.found, t)
			}
		}
	}
	slices.SortFunc(g.found, func(a, b payment.Transaction) int { return cmp.Compare(b.ID, a.ID) })
	if len(g.found) > searchGroup {
		g.found, g.More = g.found[:searchGroup], true
	}
	return g, nil
}

// searchInvoices finds the merchant's invoices of the number q, or of the customer e-mail q (it has
// an @), as the Invoices list's search does (invoiceSearch), with a link to that list.
func (h *Handler) searchInvoices(ctx context.Context, m merchant.Merchant, q string) (searchGroupView, error) {
	g := searchGroupView{ID: "search-invoices", Heading: "Invoices"}
	f := allInvoices(searchGroup + 1)
	invoiceSearch(q, &f)
	var list []invoice.Invoice
	err := h.cfg.DB.Read(ctx, func(qr store.Querier) error {
		var err error
		list, err = invoice.List(ctx, qr, m.ID, f)
		return err
	})
	if err != nil || len(list) == 0 {
		return g, err
	}
	if g.More = len(list) > searchGroup; g.More {
		list = list[:searchGroup]
	}
	for _, inv := range list {
		g.Rows = append(g.Rows, searchRow{Href: invoicesPath + "/" + inv.LookupID, Title: "Invoice " + inv.Number,
			Detail: strings.Join(nonEmpty(billedName(inv.Customer), inv.Customer.Email, string(inv.Status), amountOf(inv, inv.Totals.Total, m.Language())), " · ")})
	}
	g.SeeAll = []link{{"All invoices found by " + q, invoicesPath + "?" + url.Values{"q": {q}}.Encode()}}
	return g, nil
}
