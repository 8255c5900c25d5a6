package dashboard_test

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/branding"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// postMultipart sends the branding form as a page of Kassa's own origin would: its fields, and the
// logo file when data is not nil.
func (b *browser) postMultipart(path string, fields map[string]string, data []byte) (*http.Response, string) {
	b.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for k, v := range fields {
		mw.WriteField(k, v)
	}
	if data != nil {
		fw, _ := mw.CreateFormFile(branding.FieldLogo, "logo")
		fw.Write(data)
	}
	mw.Close()
	req, _ := http.NewRequest("POST", b.base+path, &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Origin", b.base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return b.do(req)
}

// encoded is a w×h picture encoded by enc.
func encoded(t *testing.T, w, h int, enc func(io.Writer, image.Image) error) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = uint8(i)
	}
	img.Set(0, 0, color.RGBA{R: 10, A: 255})
	var b bytes.Buffer
	if err := enc(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Settings → Branding, as a manager uses it: a PNG or a JPEG logo is stored re-encoded as a PNG
// within 400×120 and shown on the page from its hashed path; an SVG, an HTML page, a PNG signature
// before HTML and a header declaring 100000×100000 pixels are refused naming the logo field (400,
// never a 500), as is an accent colour too light for white text, naming the colour field; a refused
// form changes nothing. A sales user may not change the branding.
func TestSettingsBranding(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		b := s.browser(t)
		csrf := b.signIn("admin@maple.example")
		const path = "/dashboard/settings/ecommerce/branding"
		stored := func() (branding.Branding, []byte) {
			t.Helper()
			var br branding.Branding
			var logo []byte
			err := db.Read(context.Background(), func(q store.Querier) (err error) {
				if br, err = branding.Get(context.Background(), q, s.merchantID); err != nil {
					return err
				}
				logo, err = branding.Image(context.Background(), q, s.merchantID)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			return br, logo
		}

		for _, c := range []struct {
			name string
			data []byte
			w, h int
		}{
			{"a PNG", encoded(t, 1200, 240, png.Encode), 400, 80},
			{"a JPEG", encoded(t, 90, 60, func(w io.Writer, m image.Image) error { return jpeg.Encode(w, m, nil) }), 90, 60},
		} {
			resp, body := b.postMultipart(path, map[string]string{"csrf_token": csrf, "accent_color": "#0B5394"}, c.data)
			wantStatus(t, c.name, resp, body, http.StatusOK)
			br, logo := stored()
			cfg, format, err := image.DecodeConfig(bytes.NewReader(logo))
			if err != nil || format != "png" || cfg.Width != c.w || cfg.Height != c.h || br.Accent != "#0b5394" {
				t.Fatalf("%s: stored %s %d×%d (%v), accent %q", c.name, format, cfg.Width, cfg.Height, err, br.Accent)
			}
			if _, body := b.get("/dashboard/settings/ecommerce"); !strings.Contains(body, `<img id="brand-logo" src="`+br.LogoPath()+`"`) ||
				!strings.Contains(body, `value="#0b5394"`) {
				t.Errorf("%s: the settings page does not show the branding:\n%s", c.name, body)
			}
		}
		before, beforeLogo := stored()

		huge := encoded(t, 1, 1, png.Encode)
		copy(huge[16:24], []byte{0, 1, 0x86, 0xa0, 0, 1, 0x86, 0xa0}) // IHDR: 100000×100000, its CRC now wrong
		pngHTML := append(append([]byte{}, huge[:8]...), "<html><script>alert(1)</script>"...)
		for _, c := range []struct {
			name, accent string
			data         []byte
			field, want  string
		}{
			{"an SVG", "#0b5394", []byte(`<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>`), "logo", "PNG, JPEG or GIF"},
			{"an HTML page", "#0b5394", []byte(`<!doctype html><script>alert(1)</script>`), "logo", "text/html"},
			{"a PNG signature before HTML", "#0b5394", pngHTML, "logo", "not a readable PNG"},
			{"a decode bomb's header", "#0b5394", huge, "logo", "The logo"},
			{"a light accent", "#ffdd00", encoded(t, 10, 10, png.Encode), "accent_color", "too light"},
			{"no colour", "blue", nil, "accent_color", "#rrggbb"},
		} {
			resp, body := b.postMultipart(path, map[string]string{"csrf_token": csrf, "accent_color": c.accent}, c.data)
			wantStatus(t, c.name, resp, body, http.StatusBadRequest)
			if !strings.Contains(body, c.want) || !strings.Contains(body, `id="`+c.field+`" name="`+c.field+`"`) ||
				strings.Count(body, ` aria-invalid="true">`) != 1 {
				t.Errorf("%s: the refusal does not name %s (%q):\n%s", c.name, c.field, c.want, body)
			}
			if after, logo := stored(); after != before || !bytes.Equal(logo, beforeLogo) {
				t.Errorf("%s: refused, yet the branding changed: %+v", c.name, after)
			}
		}

		resp, body := b.postMultipart(path, map[string]string{"csrf_token": csrf, "accent_color": "", "remove_logo": "yes"}, nil)
		wantStatus(t, "remove the logo", resp, body, http.StatusOK)
		if after, logo := stored(); after != (branding.Branding{}) || logo != nil {
			t.Errorf("the logo removed, the accent emptied: %+v", after)
		}

		sales := s.browser(t)
		resp, body = sales.postMultipart(path, map[string]string{"csrf_token": sales.signIn("sales@maple.example"), "accent_color": "#000000"}, nil)
		wantStatus(t, "a sales user's branding", resp, body, http.StatusForbidden)
	})
}
