package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// A merchant who chooses de-DE and Asia/Tokyo in Settings reads a transaction's amount as CLDR writes
// euros in German and its time in Tokyo; a sale at 23:30 UTC falls on the next day there, in the
// overview's "Today", in the list's date filter and in the export's day boundary, while the export
// keeps the API's plain decimal and its zone-free time. A locale Kassa does not offer, or a zone that
// is not one, is refused naming the field, and neither is saved.
func TestLocaleAndZoneOfTheMerchant(t *testing.T) {
	t.Parallel()
	db := storetest.SQLite(t)
	// The sale is at 23:30 UTC, 08:30 the next day in Tokyo; the server's clock is 03:30 UTC after it,
	// noon of that day in Tokyo. Both are after the real time, whose cookies the client keeps.
	saleAt := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 1).Add(23*time.Hour + 30*time.Minute)
	clk := &clock{t: saleAt.Add(3*time.Hour + 30*time.Minute)}
	tokyoDay, utcDay := saleAt.AddDate(0, 0, 1).Format(time.DateOnly), saleAt.Format(time.DateOnly)
	s := newShop(t, db, server.Config{Now: clk.Now})
	if _, err := db.Exec(context.Background(), `INSERT INTO transactions (transaction_id, merchant_id, kind, status, amount, currency,
		scale, test_mode, source, created_at, updated_at) VALUES ('LOCALE00000000000001', $1, 'SALE', 'APPROVED', 123456, 'EUR', 2, true,
		'E_COMMERCE', $2, $2)`, s.merchantID, saleAt.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	b := s.browser(t)
	csrf := b.signIn("owner@maple.example")
	const euros = "1.234,56\u00a0€" // CLDR's de-DE: "." groups, "," marks decimals, the symbol follows

	t.Run("settings", func(t *testing.T) {
		for _, bad := range []struct{ zone, locale, field string }{
			{"Asia/Tokyo", "tlh-KX", "locale"}, {"Mars/Olympus", "de-DE", "timezone"}, {"Asia/Tokyo", "", "locale"},
		} {
			resp, body := b.post("/dashboard/settings/ecommerce/region", url.Values{"csrf_token": {csrf}, "timezone": {bad.zone}, "locale": {bad.locale}})
			wantStatus(t, "region "+bad.zone+" "+bad.locale, resp, body, http.StatusBadRequest)
			if !strings.Contains(body, strings.ToUpper(bad.field[:1])+bad.field[1:]+" must be") {
				t.Errorf("refusing %s %q names no %s:\n%s", bad.zone, bad.locale, bad.field, body)
			}
			if !strings.Contains(body, `id="timezone" name="timezone" type="text" value="UTC"`) ||
				!strings.Contains(body, `<option value="en-US" lang="en-US" selected>English (United States)</option>`) {
				t.Fatalf("a refused region was saved:\n%s", body)
			}
		}
		resp, body := b.post("/dashboard/settings/ecommerce/region", url.Values{"csrf_token": {csrf}, "timezone": {" Asia/Tokyo "}, "locale": {"de-DE"}})
		wantStatus(t, "save the region", resp, body, http.StatusOK)
		if !strings.Contains(body, "The time zone and locale are saved.") ||
			!strings.Contains(body, `id="timezone" name="timezone" type="text" value="Asia/Tokyo"`) ||
			!strings.Contains(body, `<option value="de-DE" lang="de-DE" selected>Deutsch (Deutschland)</option>`) ||
			!strings.Contains(body, `<option value="fr-CA" lang="fr-CA">français (Canada)</option>`) {
			t.Fatalf("the saved region:\n%s", body)
		}
	})

	t.Run("transactions", func(t *testing.T) {
		_, body := b.get("/dashboard/transactions")
		if got := rows(body, "transactions"); len(got) != 1 || !strings.HasPrefix(got[0], tokyoDay+" 08:30 LOCALE00000000000001 SALE APPROVED 1.234,56 €") {
			t.Fatalf("the list's row (its spaces made plain): %q", got)
		}
		_, body = b.get("/dashboard/transactions/LOCALE00000000000001")
		if !strings.Contains(body, euros) || !strings.Contains(body, tokyoDay+" 08:30:00 JST") {
			t.Fatalf("the transaction's page:\n%s", body)
		}
		for _, tc := range []struct {
			day   string
			found bool
		}{{tokyoDay, true}, {utcDay, false}} {
			_, body := b.get("/dashboard/transactions?from=" + tc.day + "&to=" + tc.day)
			if strings.Contains(body, "LOCALE00000000000001") != tc.found {
				t.Errorf("the list of %s in Tokyo shows the sale: %v, want %v", tc.day, !tc.found, tc.found)
			}
			resp, csv := b.get("/dashboard/transactions/export.csv?from=" + tc.day + "&to=" + tc.day)
			wantStatus(t, "the export of "+tc.day, resp, csv, http.StatusOK)
			if strings.Contains(csv, "LOCALE00000000000001") != tc.found {
				t.Errorf("the export of %s in Tokyo holds the sale: %v, want %v", tc.day, !tc.found, tc.found)
			}
			if tc.found && (!strings.Contains(csv, ",1234.56,") || !strings.Contains(csv, ","+strconv.FormatInt(saleAt.UnixMilli(), 10)+",")) {
				t.Errorf("the export's row does not keep the API's amount and time:\n%s", csv)
			}
		}
	})

	t.Run("overview", func(t *testing.T) {
		_, body := b.get("/dashboard")
		if !strings.Contains(body, "Days in Asia/Tokyo time.") ||
			!strings.Contains(body, `<tr><th scope="row">Gross volume</th><td>`+euros+`</td><td>`+euros+`</td><td>`+euros+`</td></tr>`) {
			t.Fatalf("the overview's today in Tokyo lacks the sale:\n%s", body)
		}
	})
}
