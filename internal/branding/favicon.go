package branding

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"sync"
)

// Favicon serves Kassa's icon at /favicon.ico, which browsers fetch unasked for a tab: a 32×32 PNG,
// a rounded square of the dashboard's accent colour. A page whose policy lets it load images from
// Kassa (a merchant's logo) would otherwise log a failed request for it in the browser's console.
func Favicon(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "image/png")
	h.Set("Cache-Control", "public, max-age=86400")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'")
	w.Write(favicon())
}

// favicon is the icon's PNG, drawn once.
var favicon = sync.OnceValue(func() []byte {
	const size, radius = 32, 7
	accent := color.NRGBA{R: 0x1f, G: 0x5f, B: 0xbf, A: 0xff}
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	for y := range size {
		for x := range size {
			// The distance into the nearest corner's quarter circle, outside which the pixel is clear.
			dx, dy := max(radius-x, x-(size-1-radius), 0), max(radius-y, y-(size-1-radius), 0)
			if dx*dx+dy*dy <= radius*radius {
				img.SetNRGBA(x, y, accent)
			}
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err) // an in-memory encoding of a valid image cannot fail
	}
	return b.Bytes()
})
