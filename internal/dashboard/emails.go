package dashboard

import (
	"net/http"
	"strconv"
	"time"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/httpapi"
)

// Settings → E-mails: every e-mail Kassa sent or queued for the merchant (receipts, invoices and their
// reminders, staff invitations, webhook notices), newest first, with how it went and a preview, read
// from the outbox's log (billing.Mails). A person's own e-mails (a password reset, a notice about
// their account) are theirs, not the merchant's, and are not listed. The preview is the one the
// outbox kept when the message was queued, with every link removed (billing.LinkRemoved): the page
// never shows a password link, an invoice's payment link or a webhook URL. Its HTML is shown in a
// sandboxed frame (srcdoc, no script, no origin), which inherits the page's policy: it loads nothing.
// Managers open it, as they do the rest of Settings.

const emailsPath = "/dashboard/settings/emails"

// emailRoutes registers Settings → E-mails.
func (h *Handler) emailRoutes(r *httpapi.Router) {
	r.Handle("GET", emailsPath, h.requireRole(managers, h.emails))
	r.Handle("GET", emailsPath+"/{id}", h.requireRole(managers, h.showEmail))
}

// emailRow is an e-mail as the pages show it, with the merchant's time zone.
type emailRow struct {
	billing.Mail
	Loc *time.Location
}

// emailsPage is what the list shows.
type emailsPage struct {
	Rows  []emailRow
	Pager pager
	Empty *emptyState // in place of the table when there is no e-mail
}

// emails lists the merchant's e-mails, newest first, a page at a time (?after=ID: those older).
func (h *Handler) emails(w http.ResponseWriter, r *http.Request) {
	m, ok := h.paymentsMerchant(w, r)
	if !ok {
		return
	}
	var pg emailsPage
	c := cursors{After: r.URL.Query().Get("after")}
	after, _, err := c.rowIDs()
	if h.listRefused(w, r, "emails", "E-mails", pg, err) {
		return
	}
	rows, more, err := billing.Mails(r.Context(), h.cfg.DB, m.ID, after, pageSize)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	for _, mail := range rows {
		pg.Rows = append(pg.Rows, emailRow{Mail: mail, Loc: m.Location()})
	}
	if after != 0 {
		pg.Pager.Newer = emailsPath
	}
	if more {
		pg.Pager.Older = "?after=" + strconv.FormatInt(rows[len(rows)-1].ID, 10)
	}
	if len(rows) == 0 && after == 0 {
		pg.Empty = &emptyState{ID: "emails-empty", Heading: "No e-mails yet",
			About:  "Receipts, invoices, reminders and staff invitations that Kassa sends for you appear here, with how they went.",
			Action: link{"Invite staff", "/dashboard/staff"}}
	}
	h.render(w, r, http.StatusOK, "emails", view{Title: "E-mails", Wide: true, Data: pg})
}

// showEmail shows one of the merchant's e-mails and its preview; another merchant's, a person's own
// or none is the 404 page.
func (h *Handler) showEmail(w http.ResponseWriter, r *http.Request) {
	m, ok := h.paymentsMerchant(w, r)
	if !ok {
		return
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		h.notFound(w, r)
		return
	}
	mail, found, err := billing.MailOf(r.Context(), h.cfg.DB, m.ID, id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if !found {
		h.notFound(w, r)
		return
	}
	h.render(w, r, http.StatusOK, "email", view{Title: mail.Kind.Label() + " to " + mail.To, Data: emailRow{Mail: mail, Loc: m.Location()}})
}
