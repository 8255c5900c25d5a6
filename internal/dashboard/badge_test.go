package dashboard

import (
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/hostedpage"
	"github.com/kassapay/kassa/internal/invoice"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/webhook"
)

// Every status of the objects the pages show has a tone of its own, so that none falls to neutral
// unnoticed; a badge says its status in words, escaped, with the tone's class and the id asked for.
func TestBadges(t *testing.T) {
	t.Parallel()
	all := append([]string{payment.StatusPending, payment.StatusApproved, payment.StatusDeclined,
		string(invoice.Draft), string(invoice.Sent), string(invoice.Paid), string(invoice.Overdue), string(invoice.Cancelled),
		webhook.StatusPending, webhook.StatusSucceeded, webhook.StatusFailed}, subscriptionStatuses...)
	all = append(append(all, checkout.Statuses...), hostedpage.Statuses...)
	for _, s := range all {
		if _, ok := tones[strings.ToUpper(s)]; !ok {
			t.Errorf("status %q has no tone", s)
		}
	}
	for status, want := range map[string]string{
		"APPROVED":                `<span class="badge badge-success">APPROVED</span>`,
		"DECLINED":                `<span class="badge badge-critical">DECLINED</span>`,
		"requires_payment_method": `<span class="badge badge-warning">requires_payment_method</span>`,
		"<b>odd</b>":              `<span class="badge badge-neutral">&lt;b&gt;odd&lt;/b&gt;</span>`,
	} {
		if got := string(badge(status)); got != want {
			t.Errorf("badge(%q) = %s, want %s", status, got, want)
		}
	}
	if got := string(badge(invoice.Paid, "invoice-status")); got != `<span class="badge badge-success" id="invoice-status">PAID</span>` {
		t.Errorf("a typed status with an id: %s", got)
	}
}
