package invoice_test

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/branding"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// fetch GETs u and returns its status, headers and body.
func fetch(t *testing.T, u string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// A merchant's branding shows wherever its customer meets it: the logo (from its hashed path, served
// as an image/png) and the accent colour, through --accent in the page's nonce'd <style> and never a
// style attribute, on the card form an invoice's link opens and on the invoice's own page once paid;
// the logo as an image of the invoice's PDF; and in the invoice's e-mail and its receipt, the logo by
// its absolute URL under Kassa's public URL, the accent on the title and the links.
func TestBrandingShown(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		img := image.NewRGBA(image.Rect(0, 0, 800, 200))
		for i := range img.Pix {
			img.Pix[i] = 0xc0
		}
		var raw bytes.Buffer
		png.Encode(&raw, img)
		logo, err := branding.Logo(raw.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := db.Write(ctx, func(tx *store.Tx) error {
			if err := branding.SetLogo(ctx, tx, f.m.ID, logo, time.Now()); err != nil {
				return err
			}
			return branding.SetAccent(ctx, tx, f.m.ID, "#0b5394", time.Now())
		}); err != nil {
			t.Fatal(err)
		}
		var brand branding.Branding
		db.Read(ctx, func(q store.Querier) (err error) { brand, err = branding.Get(ctx, q, f.m.ID); return err })
		if brand.LogoPath() == "" {
			t.Fatal("no logo stored")
		}
		if status, h, body := fetch(t, f.srv.URL+brand.LogoPath()); status != 200 || h.Get("Content-Type") != "image/png" ||
			h.Get("X-Content-Type-Options") != "nosniff" || !bytes.Equal(body, logo) {
			t.Fatalf("the logo's URL: %d %v", status, h)
		}
		styled := regexp.MustCompile(`(?s)<style nonce="[^"]+">.*--accent: #0b5394;.*</style>`)
		page := func(what, body string) {
			t.Helper()
			if !strings.Contains(body, `id="brand-logo" src="`+brand.LogoPath()+`"`) || !styled.MatchString(body) ||
				regexp.MustCompile(`<[a-z][^>]* style=`).MatchString(body) {
				t.Errorf("%s: no logo, no accent in the nonce'd style, or a style attribute:\n%s", what, body)
			}
		}

		inv := sentInvoice(t, f.m, "BR-1")
		mails := outbox(t, f.srv, f.m.ID)
		if len(mails) != 1 || !strings.Contains(mails[0].html, `<img src="`+f.srv.URL+brand.LogoPath()+`"`) ||
			!strings.Contains(mails[0].html, `<h1 style="color: #0b5394">`) || !strings.Contains(mails[0].html, `style="color: #0b5394">View and pay`) {
			t.Errorf("the invoice's e-mail: %+v", mails)
		}
		form, _, status := openForm(t, inv.Str("payment_url"))
		if status != 303 {
			t.Fatalf("the invoice's link: %d", status)
		}
		formPage, _ := getPage(t, f.srv.URL+form)
		page("the card form", formPage)

		status, h, doc := fetch(t, inv.Str("pdf_url"))
		if status != 200 || h.Get("Content-Type") != "application/pdf" || !bytes.Contains(doc, []byte("/Subtype /Image")) ||
			!bytes.Contains(doc, []byte("/Width 400")) || !bytes.Contains(doc, []byte("/Height 100")) {
			t.Errorf("the PDF (%d) holds no 400×100 image", status)
		}

		if r := f.srv.Do(t, "POST", form+"/pay", cardBody); r.Status != 200 || r.Str("outcome") != "completed" {
			t.Fatalf("pay: %d %s", r.Status, r.Raw)
		}
		_, paid, _ := openForm(t, inv.Str("payment_url"))
		page("the paid invoice's page", paid)
		if !strings.Contains(paid, `<a id="pdf-link" href="pdf">`) {
			t.Errorf("the paid invoice's page has no link to its PDF:\n%s", paid)
		}
		rs := receipts(t, f.srv, f.m.ID)
		if len(rs) != 1 || !strings.Contains(rs[0].html, `<img src="`+f.srv.URL+brand.LogoPath()+`"`) || !strings.Contains(rs[0].html, "color: #0b5394") {
			t.Errorf("the receipt's e-mail: %+v", rs)
		}
	})
}
