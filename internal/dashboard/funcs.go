package dashboard

import (
	"html/template"
	"net/http"
	"time"

	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/webhook"

	"golang.org/x/text/language"
)

// funcs are the functions every page template may call.
var funcs = template.FuncMap{
	// amount formats minor units of a currency as a person in the merchant's locale (view.Lang) reads
	// it: "$12.50" in en-US, "12,50 $" in fr-CA (money.Display).
	"amount": money.Display,
	// when formats a time in a location as the dashboard shows times: "2026-11-23 14:05".
	"when": func(t time.Time, loc *time.Location) string {
		if t.IsZero() {
			return ""
		}
		if loc == nil {
			loc = time.UTC
		}
		return t.In(loc).Format("2006-01-02 15:04")
	},
	// millis is a time the store keeps as epoch milliseconds, for when.
	"millis": fromMillis,
	// badge is a status in its coloured badge (badge.go).
	"badge": badge,
	// deliveryID is the id of a webhook delivery, as the API names it, from its row id.
	"deliveryID": webhook.DeliveryID,
}

// lang is the signed-in merchant's locale, for a page that formats amounts without reading the
// merchant otherwise; the default locale when the merchant cannot be read, as render shows it then.
func (h *Handler) lang(r *http.Request) language.Tag {
	m, err := h.cfg.Merchants.Get(r.Context(), signedIn(r).MerchantID)
	if err != nil {
		return money.DefaultLocale
	}
	return m.Language()
}

// fromMillis is a time stored as epoch milliseconds; 0, for not set, is the zero time.
func fromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
