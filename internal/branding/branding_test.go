package branding_test

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/branding"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// picture is a w×h image of two colours, encoded by enc.
func picture(t testing.TB, w, h int, enc func(io.Writer, image.Image) error) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			c := color.RGBA{R: 200, G: 30, B: 30, A: 255}
			if x < w/2 {
				c = color.RGBA{A: 0} // transparent: the scaling keeps it clean
			}
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := enc(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

var (
	encPNG  = func(w io.Writer, m image.Image) error { return png.Encode(w, m) }
	encJPEG = func(w io.Writer, m image.Image) error { return jpeg.Encode(w, m, nil) }
	encGIF  = func(w io.Writer, m image.Image) error { return gif.Encode(w, m, nil) }
)

// hugeHeader is a PNG header that declares w×h pixels, with no pixel data: only DecodeConfig may read
// it, and the upload must be refused from it, before anything is decoded.
func hugeHeader(t testing.TB, w, h int) []byte {
	b := picture(t, 1, 1, encPNG)
	// IHDR's width and height follow the 8-byte signature, the chunk's length and its type.
	be := func(v int) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }
	copy(b[16:20], be(w))
	copy(b[20:24], be(h))
	copy(b[29:33], be(int(crc32.ChecksumIEEE(b[12:29])))) // IHDR's CRC, over its type and data
	return b
}

// wantField fails t unless err is a 400 naming field, whose message says want.
func wantField(t *testing.T, what string, err error, field, want string) {
	t.Helper()
	var f *fault.Error
	if !errors.As(err, &f) || f.Status != http.StatusBadRequest || f.Field != field || !strings.Contains(f.Message, want) {
		t.Errorf("%s: %v, want a 400 on %s saying %q", what, err, field, want)
	}
}

// An uploaded logo is accepted as a PNG, JPEG or GIF by its bytes, and stored as a PNG re-encoded
// from its pixels within 400×120, its proportions kept; anything else — SVG, HTML, a PNG signature
// before HTML, a header declaring a decode bomb, an oversized file — is a 400 naming the logo field.
func TestLogo(t *testing.T) {
	for _, c := range []struct {
		name string
		in   []byte
		w, h int
	}{
		{"a wide PNG", picture(t, 1600, 400, encPNG), 400, 100}, // the only one with transparency
		{"a tall JPEG", picture(t, 300, 600, encJPEG), 60, 120},
		{"a small GIF, never scaled up", picture(t, 40, 20, encGIF), 40, 20},
	} {
		out, err := branding.Logo(c.in)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		img, format, err := image.Decode(bytes.NewReader(out))
		if err != nil || format != "png" || img.Bounds().Dx() != c.w || img.Bounds().Dy() != c.h {
			t.Errorf("%s: stored %s %v (%v), want a %d×%d PNG", c.name, format, img.Bounds(), err, c.w, c.h)
			continue
		}
		if _, _, _, a := img.At(0, 0).RGBA(); format == "png" && strings.Contains(c.name, "PNG") && a != 0 {
			t.Errorf("%s: the transparent half is not transparent", c.name)
		}
	}

	pngHTML := append(append([]byte{}, picture(t, 1, 1, encPNG)[:16]...), `<html><script>alert(1)</script></html>`...)
	for _, c := range []struct {
		name string
		in   []byte
		want string
	}{
		{"nothing", nil, "Choose an image"},
		{"an SVG", []byte(`<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><rect width="10" height="10"/></svg>`), "PNG, JPEG or GIF"},
		{"an HTML page", []byte(`<!doctype html><html><body><script>alert(1)</script></body></html>`), "reads as text/html"},
		{"a PNG signature before HTML", pngHTML, "not a readable PNG"},
		{"a header of 100000×100000 pixels", hugeHeader(t, 100000, 100000), "at most 2000×2000"},
		{"2001 pixels wide", hugeHeader(t, 2001, 10), "at most 2000×2000"},
		{"a file over 512 KiB", append(picture(t, 1, 1, encPNG), make([]byte, branding.MaxLogoBytes)...), "at most 512 KiB"},
	} {
		out, err := branding.Logo(c.in)
		wantField(t, c.name, err, branding.FieldLogo, c.want)
		if out != nil {
			t.Errorf("%s: stored %d bytes", c.name, len(out))
		}
	}
}

// An accent colour is #rrggbb, any case; a colour on which white text, or which on the white page,
// reads below WCAG AA's 4.5:1 is refused naming the accent field and giving the ratio.
func TestAccent(t *testing.T) {
	for in, want := range map[string]string{"": "", " #1F5FBF ": "#1f5fbf", "#000000": "#000000", "#767676": "#767676"} {
		if got, err := branding.ParseAccent(in); err != nil || got != want {
			t.Errorf("ParseAccent(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"#ffffff": "contrast of 1.00:1", "#777777": "contrast of 4.47:1", "#ffd700": "too light",
		"1f5fbf": "#rrggbb", "#1f5fb": "#rrggbb", "#1f5fbg": "#rrggbb", "red": "#rrggbb", "#1f5fbf00": "#rrggbb",
	} {
		_, err := branding.ParseAccent(in)
		wantField(t, in, err, branding.FieldAccent, want)
	}
	if c := branding.Contrast([3]uint8{0, 0, 0}, [3]uint8{255, 255, 255}); c < 20.99 || c > 21.01 {
		t.Errorf("black on white: %.3f, want 21", c)
	}
}

// FuzzAccent: whatever the form sends, ParseAccent returns a lower-case #rrggbb of at least 4.5:1
// against white, or "" for none, or a 400 naming the accent field; never a panic.
func FuzzAccent(f *testing.F) {
	for _, s := range []string{"", "#1f5fbf", "#FFFFFF", "#777777", "#76767", "#\x00\x00\x00\x00\x00\x00", " #000000\t", "#ééé"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := branding.ParseAccent(s)
		if err != nil {
			var fe *fault.Error
			if !errors.As(err, &fe) || fe.Status != http.StatusBadRequest || fe.Field != branding.FieldAccent {
				t.Fatalf("ParseAccent(%q): %v", s, err)
			}
			return
		}
		if got == "" {
			if strings.TrimSpace(s) != "" {
				t.Fatalf("ParseAccent(%q) = \"\"", s)
			}
			return
		}
		var rgb [3]uint8
		if len(got) != 7 || got != strings.ToLower(got) || !hexOK(got[1:], rgb[:]) ||
			branding.Contrast(rgb, [3]uint8{255, 255, 255}) < branding.MinContrast {
			t.Fatalf("ParseAccent(%q) = %q", s, got)
		}
	})
}

// hexOK decodes six hex digits into out.
func hexOK(s string, out []byte) bool {
	for i := range 3 {
		var v byte
		for _, c := range s[2*i : 2*i+2] {
			switch {
			case c >= '0' && c <= '9':
				v = v*16 + byte(c-'0')
			case c >= 'a' && c <= 'f':
				v = v*16 + byte(c-'a'+10)
			default:
				return false
			}
		}
		out[i] = v
	}
	return true
}

// A stored logo is served by its hash as image/png, nosniff, cacheable forever; a new logo has a new
// path and the old one is gone; removing it leaves the accent. On both backends.
func TestStoredBranding(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		var id string
		if err := db.Write(ctx, func(tx *store.Tx) error {
			m, err := merchant.Create(ctx, tx, merchant.New{Name: "Brand Shop", Email: "brand@shop.example"}, time.Now())
			id = m.ID
			return err
		}); err != nil {
			t.Fatal(err)
		}
		serve := branding.ServeLogo(db)
		get := func(path string) *httptest.ResponseRecorder {
			req := httptest.NewRequest("GET", path, nil)
			req.SetPathValue("file", strings.TrimPrefix(path, "/brand/logo/"))
			rec := httptest.NewRecorder()
			serve(rec, req)
			return rec
		}
		read := func() branding.Branding {
			t.Helper()
			var b branding.Branding
			if err := db.Read(ctx, func(q store.Querier) (err error) { b, err = branding.Get(ctx, q, id); return err }); err != nil {
				t.Fatal(err)
			}
			return b
		}
		write := func(f func(tx *store.Tx) error) {
			t.Helper()
			if err := db.Write(ctx, f); err != nil {
				t.Fatal(err)
			}
		}
		if b := read(); b != (branding.Branding{}) || b.LogoPath() != "" {
			t.Fatalf("no branding set: %+v", b)
		}
		first, _ := branding.Logo(picture(t, 800, 240, encPNG))
		write(func(tx *store.Tx) error { return branding.SetLogo(ctx, tx, id, first, time.Now()) })
		write(func(tx *store.Tx) error { return branding.SetAccent(ctx, tx, id, "#1f5fbf", time.Now()) })
		b := read()
		rec := get(b.LogoPath())
		h := rec.Header()
		if b.Accent != "#1f5fbf" || rec.Code != 200 || !bytes.Equal(rec.Body.Bytes(), first) || h.Get("Content-Type") != "image/png" ||
			h.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(h.Get("Cache-Control"), "immutable") {
			t.Fatalf("%+v: %d %v", b, rec.Code, h)
		}
		second, _ := branding.Logo(picture(t, 100, 100, encJPEG))
		write(func(tx *store.Tx) error { return branding.SetLogo(ctx, tx, id, second, time.Now()) })
		if nb := read(); nb.LogoPath() == b.LogoPath() || get(b.LogoPath()).Code != 404 || get(nb.LogoPath()).Code != 200 {
			t.Fatalf("a new logo: %+v after %+v", nb, b)
		}
		for _, p := range []string{"/brand/logo/x.png", "/brand/logo/" + b.LogoHash, "/brand/logo/" + strings.Repeat("g", 32) + ".png"} {
			if rec := get(p); rec.Code != 404 {
				t.Errorf("%s: %d", p, rec.Code)
			}
		}
		write(func(tx *store.Tx) error { return branding.SetLogo(ctx, tx, id, nil, time.Now()) })
		if b := read(); b.LogoHash != "" || b.Accent != "#1f5fbf" {
			t.Fatalf("the logo removed: %+v", b)
		}
	})
}

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// The favicon is a 32×32 PNG of the accent colour with clear corners, cacheable and not sniffed.
func TestFavicon(t *testing.T) {
	rec := httptest.NewRecorder()
	branding.Favicon(rec, httptest.NewRequest("GET", "/favicon.ico", nil))
	h := rec.Header()
	if rec.Code != http.StatusOK || h.Get("Content-Type") != "image/png" || h.Get("X-Content-Type-Options") != "nosniff" || !strings.HasPrefix(h.Get("Cache-Control"), "public") {
		t.Fatalf("%d %v", rec.Code, h)
	}
	img, err := png.Decode(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 32 || b.Dy() != 32 {
		t.Fatalf("bounds %v", b)
	}
	if _, _, _, a := img.At(0, 0).RGBA(); a != 0 {
		t.Errorf("the corner is not clear")
	}
	if c := color.NRGBAModel.Convert(img.At(16, 16)).(color.NRGBA); c != (color.NRGBA{R: 0x1f, G: 0x5f, B: 0xbf, A: 0xff}) {
		t.Errorf("the middle is %v", c)
	}
}
