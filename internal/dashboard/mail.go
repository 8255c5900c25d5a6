package dashboard

import (
	"context"
	"fmt"
	"html/template"
	"net/url"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/user"
)

// LinkURL is the address, on the Kassa whose public URL is base, of the page where a link's holder
// sets a password.
func LinkURL(base, token string) string {
	return strings.TrimRight(base, "/") + "/dashboard/password?token=" + url.QueryEscape(token)
}

// linkMail is what the e-mail carrying a password link says.
type linkMail struct {
	Merchant, Link string
	Invite         bool
	Join           bool // an invitation of a person who signs in with a password already
	Valid          string
}

var linkHTML = template.Must(template.New("link").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Kassa</title></head>
<body style="font-family: system-ui, sans-serif; color: #1a1a1a">
{{if .Join}}<p>You are invited to the Kassa dashboard of {{.Merchant}}.</p>
<p><a href="{{.Link}}">Accept the invitation</a> within {{.Valid}}. You sign in with the password you already have.</p>
{{else if .Invite}}<p>You are invited to the Kassa dashboard of {{.Merchant}}.</p>
<p><a href="{{.Link}}">Choose your password</a> within {{.Valid}}.</p>
{{else}}<p>Someone asked to reset your password for the Kassa dashboard of {{.Merchant}}.</p>
<p><a href="{{.Link}}">Choose a new password</a> within {{.Valid}}. If it was not you, ignore this e-mail: your password stays as it is.</p>{{end}}
</body></html>
`))

// SendLink issues a password link of kind for u on the Kassa at base, in the caller's transaction, and
// when mail is set queues the e-mail that carries it (queueLinkMail). It returns the link's address.
func SendLink(ctx context.Context, tx *store.Tx, u user.User, kind user.LinkKind, base string, mail bool, now time.Time) (string, time.Time, error) {
	l, err := user.IssueLink(ctx, tx, u.ID, kind, u.MerchantID, now)
	if err != nil || !mail {
		return LinkURL(base, l.Token), l.ExpiresAt, err
	}
	m, err := merchant.Get(ctx, tx, u.MerchantID)
	if err != nil {
		return "", time.Time{}, err
	}
	link := LinkURL(base, l.Token)
	return link, l.ExpiresAt, queueLinkMail(ctx, tx, u, m.Name, kind, link, now)
}

// queueLinkMail puts the e-mail that carries a password link to u in the outbox (billing.Queue), in
// the caller's transaction.
func queueLinkMail(ctx context.Context, tx *store.Tx, u user.User, merchantName string, kind user.LinkKind, link string, now time.Time) error {
	m := linkMail{Merchant: merchantName, Link: link, Invite: kind == user.Invite, Join: kind == user.Invite && u.HasPassword, Valid: validFor(kind.TTL())}
	var html strings.Builder
	if err := linkHTML.Execute(&html, m); err != nil {
		return err
	}
	about, subject, text := billing.KindPasswordReset, "Reset your Kassa password", fmt.Sprintf("Someone asked to reset your password for the Kassa dashboard of %s.\n\n"+
		"Choose a new password within %s:\n%s\n\nIf it was not you, ignore this e-mail: your password stays as it is.\n", m.Merchant, m.Valid, m.Link)
	switch {
	case m.Join:
		about, subject, text = billing.KindInvitation, "You are invited to "+merchantName+" on Kassa", fmt.Sprintf("You are invited to the Kassa dashboard of %s.\n\n"+
			"Accept the invitation within %s (you sign in with the password you already have):\n%s\n", m.Merchant, m.Valid, m.Link)
	case m.Invite:
		about, subject, text = billing.KindInvitation, "You are invited to "+merchantName+" on Kassa", fmt.Sprintf("You are invited to the Kassa dashboard of %s.\n\n"+
			"Choose your password within %s:\n%s\n", m.Merchant, m.Valid, m.Link)
	}
	return billing.Queue(ctx, tx, u.MerchantID, billing.Message{Kind: about, To: u.Email, Subject: subject, Text: text, HTML: html.String()}, now)
}

// validFor says how long a link works, in words.
func validFor(d time.Duration) string {
	if d >= 2*time.Hour {
		return fmt.Sprintf("%d hours", int(d/time.Hour))
	}
	return fmt.Sprintf("%d minutes", int(d/time.Minute))
}
