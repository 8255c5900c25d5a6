// Package branding is a merchant's branding as its customers see it: a logo and an accent colour,
// shown on the hosted payment page, an invoice's page and PDF, the receipt pages and the e-mails Kassa
// sends for the merchant.
//
// What is stored is safe to show anywhere by construction. The logo is never the bytes uploaded: an
// upload is a PNG, JPEG or GIF by its bytes (http.DetectContentType and the decoder agreeing), of at
// most MaxLogoBytes and MaxLogoSide pixels a side (read from its header before any pixel is decoded),
// and what is stored is a PNG re-encoded from its pixels, scaled to fit LogoWidth×LogoHeight: nothing
// of a polyglot's other reading survives. The accent is a #rrggbb colour on which white text, and
// which on the white page, reads at WCAG AA (4.5:1).
package branding

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"image"
	"image/draw"
	_ "image/gif" // the decoders of the formats accepted
	_ "image/jpeg"
	"image/png"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/store"
)

// The logo's limits: of the upload, and of the PNG stored.
const (
	MaxLogoBytes = 512 << 10 // 512 KiB
	MaxLogoSide  = 2000      // pixels, either side
	LogoWidth    = 400       // the stored logo fits LogoWidth×LogoHeight, its proportions kept
	LogoHeight   = 120
)

// Fields named by the errors of an upload.
const (
	FieldLogo   = "logo"
	FieldAccent = "accent_color"
)

// MinContrast is WCAG 2's AA contrast ratio for normal text.
const MinContrast = 4.5

// Branding is a merchant's branding. The zero value is Kassa's own: no logo, its own accent.
type Branding struct {
	LogoHash string // the stored logo's hash, "" for none
	Accent   string // #rrggbb, "" for Kassa's own
}

// LogoPath is the logo's path on Kassa ("" for none): the hash in the name makes it cacheable forever.
func (b Branding) LogoPath() string {
	if b.LogoHash == "" {
		return ""
	}
	return "/brand/logo/" + b.LogoHash + ".png"
}

// LogoURL is the logo's absolute URL under base, Kassa's public URL, for an e-mail: "" without a logo,
// and without a base (an e-mail cannot resolve a path).
func (b Branding) LogoURL(base string) string {
	base = strings.TrimRight(base, "/")
	if b.LogoHash == "" || base == "" {
		return ""
	}
	return base + b.LogoPath()
}

// RGB is the accent colour's red, green and blue; ok is false for Kassa's own.
func (b Branding) RGB() (r, g, bl int, ok bool) {
	raw, err := hex.DecodeString(strings.TrimPrefix(b.Accent, "#"))
	if len(b.Accent) != 7 || err != nil {
		return 0, 0, 0, false
	}
	return int(raw[0]), int(raw[1]), int(raw[2]), true
}

// Logo checks an uploaded logo and returns the PNG Kassa stores of it. Every refusal is a 400 naming
// FieldLogo.
func Logo(data []byte) ([]byte, error) {
	if len(data) == 0 {
		return nil, fault.Invalid(FieldLogo, "Choose an image file for the logo.")
	}
	if len(data) > MaxLogoBytes {
		return nil, fault.Invalid(FieldLogo, "The logo is %d KiB; at most %d KiB is accepted.", (len(data)+1023)/1024, MaxLogoBytes/1024)
	}
	sniffed := http.DetectContentType(data)
	format, ok := map[string]string{"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif"}[sniffed]
	if !ok {
		return nil, fault.Invalid(FieldLogo, "The logo must be a PNG, JPEG or GIF image; this file reads as %s.", strings.Split(sniffed, ";")[0])
	}
	cfg, decoded, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil || decoded != format {
		return nil, fault.Invalid(FieldLogo, "The logo is not a readable %s image.", strings.ToUpper(format))
	}
	if cfg.Width < 1 || cfg.Height < 1 || cfg.Width > MaxLogoSide || cfg.Height > MaxLogoSide {
		return nil, fault.Invalid(FieldLogo, "The logo is %d×%d pixels; at most %d×%d is accepted.", cfg.Width, cfg.Height, MaxLogoSide, MaxLogoSide)
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fault.Invalid(FieldLogo, "The logo is not a readable %s image.", strings.ToUpper(format))
	}
	var out bytes.Buffer
	if err := png.Encode(&out, fit(img, LogoWidth, LogoHeight)); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// fit is img scaled down to fit w×h, its proportions kept (never up): each pixel the average of the
// source pixels it covers, in premultiplied colour, so that transparent edges stay clean.
func fit(img image.Image, w, h int) *image.RGBA {
	b := img.Bounds()
	sw, sh := b.Dx(), b.Dy()
	scale := math.Min(1, math.Min(float64(w)/float64(sw), float64(h)/float64(sh)))
	tw, th := max(1, int(math.Round(float64(sw)*scale))), max(1, int(math.Round(float64(sh)*scale)))
	src := image.NewRGBA(image.Rect(0, 0, sw, sh))
	draw.Draw(src, src.Bounds(), img, b.Min, draw.Src)
	if tw == sw && th == sh {
		return src
	}
	dst := image.NewRGBA(image.Rect(0, 0, tw, th))
	for y := range th {
		y0, y1 := y*sh/th, max((y+1)*sh/th, y*sh/th+1)
		for x := range tw {
			x0, x1 := x*sw/tw, max((x+1)*sw/tw, x*sw/tw+1)
			var sum [4]int
			for sy := y0; sy < y1; sy++ {
				row := src.Pix[sy*src.Stride+x0*4 : sy*src.Stride+x1*4]
				for i := 0; i < len(row); i += 4 {
					sum[0] += int(row[i])
					sum[1] += int(row[i+1])
					sum[2] += int(row[i+2])
					sum[3] += int(row[i+3])
				}
			}
			n := (y1 - y0) * (x1 - x0)
			p := dst.Pix[y*dst.Stride+x*4:]
			for i := range 4 {
				p[i] = uint8((sum[i] + n/2) / n)
			}
		}
	}
	return dst
}

// ParseAccent reads an accent colour as the settings form sends it: "#rrggbb" (case ignored, spaces
// around it too), "" for Kassa's own. It returns it in lower case, or a 400 naming FieldAccent: for a
// colour that is not #rrggbb, and for one whose contrast with white button text, or with the white
// page behind links in it, is below MinContrast (Kassa's light pages are white, so one ratio is both;
// the message says so and gives it).
func ParseAccent(s string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return "", nil
	}
	if len(s) != 7 || s[0] != '#' {
		return "", fault.Invalid(FieldAccent, "The accent colour must be written #rrggbb, for example #1f5fbf.")
	}
	raw, err := hex.DecodeString(s[1:])
	if err != nil {
		return "", fault.Invalid(FieldAccent, "The accent colour must be written #rrggbb, for example #1f5fbf.")
	}
	if c := Contrast([3]uint8(raw), [3]uint8{255, 255, 255}); c < MinContrast {
		return "", fault.Invalid(FieldAccent,
			"The accent colour %s is too light: white button text on it, and links in it on the white page, have a contrast of %.2f:1; WCAG AA asks at least 4.5:1. Choose a darker colour.",
			s, math.Floor(c*100)/100)
	}
	return s, nil
}

// Contrast is WCAG 2's contrast ratio of two sRGB colours, from 1 to 21.
func Contrast(a, b [3]uint8) float64 {
	la, lb := luminance(a), luminance(b)
	if la < lb {
		la, lb = lb, la
	}
	return (la + 0.05) / (lb + 0.05)
}

// luminance is WCAG 2's relative luminance of an sRGB colour.
func luminance(c [3]uint8) float64 {
	var l [3]float64
	for i, v := range c {
		s := float64(v) / 255
		if s <= 0.04045 {
			l[i] = s / 12.92
		} else {
			l[i] = math.Pow((s+0.055)/1.055, 2.4)
		}
	}
	return 0.2126*l[0] + 0.7152*l[1] + 0.0722*l[2]
}

// Get reads the merchant's branding: the zero Branding for a merchant that set none.
func Get(ctx context.Context, q store.Querier, merchantID string) (Branding, error) {
	var b Branding
	err := q.QueryRowContext(ctx, `SELECT logo_hash, accent FROM merchant_branding WHERE merchant_id = $1`, merchantID).
		Scan(&b.LogoHash, &b.Accent)
	if errors.Is(err, sql.ErrNoRows) {
		return Branding{}, nil
	}
	return b, err
}

// Image is the merchant's stored logo (a PNG), nil for none.
func Image(ctx context.Context, q store.Querier, merchantID string) ([]byte, error) {
	var logo []byte
	err := q.QueryRowContext(ctx, `SELECT logo FROM merchant_branding WHERE merchant_id = $1 AND logo_hash <> ''`, merchantID).Scan(&logo)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return logo, err
}

// SetLogo stores logo, a PNG that Logo made, as the merchant's logo; nil removes it.
func SetLogo(ctx context.Context, tx *store.Tx, merchantID string, logo []byte, now time.Time) error {
	hash := ""
	if logo != nil {
		sum := sha256.Sum256(logo)
		hash = hex.EncodeToString(sum[:16])
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO merchant_branding (merchant_id, logo, logo_hash, updated_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (merchant_id) DO UPDATE SET logo = excluded.logo, logo_hash = excluded.logo_hash, updated_at = excluded.updated_at`,
		merchantID, logo, hash, now.UnixMilli())
	return err
}

// SetAccent stores accent, as ParseAccent returned it, as the merchant's accent colour.
func SetAccent(ctx context.Context, tx *store.Tx, merchantID, accent string, now time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO merchant_branding (merchant_id, accent, updated_at) VALUES ($1, $2, $3)
		ON CONFLICT (merchant_id) DO UPDATE SET accent = excluded.accent, updated_at = excluded.updated_at`,
		merchantID, accent, now.UnixMilli())
	return err
}

// ServeLogo serves GET /brand/logo/{file}: a stored logo by the hash its name carries, as image/png
// with nosniff, cached for a year (a new logo has a new name). Any other name is a 404.
func ServeLogo(db *store.DB) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		hash, ok := strings.CutSuffix(r.PathValue("file"), ".png")
		var logo []byte
		err := sql.ErrNoRows
		if ok && len(hash) == 32 {
			if _, herr := hex.DecodeString(hash); herr == nil {
				err = db.Read(r.Context(), func(q store.Querier) error {
					return q.QueryRowContext(r.Context(), `SELECT logo FROM merchant_branding WHERE logo_hash = $1 LIMIT 1`, hash).Scan(&logo)
				})
			}
		}
		if errors.Is(err, sql.ErrNoRows) {
			err = fault.NotFound("No such logo.")
		}
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Type", "image/png")
		h.Set("Content-Security-Policy", "default-src 'none'")
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
		h.Set("Content-Length", fmt.Sprint(len(logo)))
		w.Write(logo)
	}
}
