package dashboard

import (
	"fmt"
	"html/template"
	"strings"
)

// Tones of a status badge: how the status went, which its colours repeat. A status the pages do not
// know is neutral.
const (
	toneSuccess  = "success"  // done as asked: approved, paid, active
	toneCritical = "critical" // failed or stopped, wanting the merchant: declined, suspended, overdue
	toneWarning  = "warning"  // not finished, may still fail: pending, in retry, waiting on the customer
	toneInfo     = "info"     // under way as it should be: sent, open, processing
	toneNeutral  = "neutral"  // ended or set aside, nothing to do: draft, canceled, expired, paused
)

// tones are the statuses of the ledger, subscriptions, invoices, payment intents, hosted-page
// sessions and webhook deliveries, by their upper-case name, and their tones.
var tones = map[string]string{
	"APPROVED": toneSuccess, "SUCCEEDED": toneSuccess, "PAID": toneSuccess, "ACTIVE": toneSuccess, "COMPLETED": toneSuccess,
	"DECLINED": toneCritical, "FAILED": toneCritical, "SUSPENDED": toneCritical, "OVERDUE": toneCritical,
	"PENDING": toneWarning, "RETRY": toneWarning, "REQUIRES_PAYMENT_METHOD": toneWarning, "REQUIRES_ACTION": toneWarning,
	"REQUIRES_CONFIRMATION": toneWarning, "REQUIRES_CAPTURE": toneWarning,
	"SENT": toneInfo, "OPEN": toneInfo, "PROCESSING": toneInfo,
	"DRAFT": toneNeutral, "CANCELED": toneNeutral, "CANCELLED": toneNeutral, "EXPIRED": toneNeutral, "PAUSED": toneNeutral,
}

// badge is a status as every page shows it: its name, as the API and the exports spell it, in a
// badge coloured by its tone. The words say the status, so colour is never the only signal; the
// colours stand at 4.5:1 in the light and the dark scheme (layout.html). id, when given, is the
// badge's element id.
func badge(status any, id ...string) template.HTML {
	s := fmt.Sprint(status)
	tone, ok := tones[strings.ToUpper(s)]
	if !ok {
		tone = toneNeutral
	}
	attr := ""
	if len(id) > 0 {
		attr = ` id="` + template.HTMLEscapeString(id[0]) + `"`
	}
	return template.HTML(`<span class="badge badge-` + tone + `"` + attr + `>` + template.HTMLEscapeString(s) + `</span>`)
}
