// Package qrcode draws QR codes as inline SVG, for the dashboard's two-factor enrolment: an
// authenticator app scans the otpauth URI (package totp) from the screen. The encoding is rsc.io/qr's;
// this package adds the quiet zone and the drawing.
package qrcode

import (
	"fmt"
	"html/template"
	"strings"

	"rsc.io/qr"
)

// QuietZone is the light margin around the symbol, in modules: "The quiet zone ... shall be 4X wide"
// (ISO/IEC 18004, section 6.3.8); scanners look for it.
const QuietZone = 4

// Code is a QR code: its modules and the quiet zone around them.
type Code struct{ c *qr.Code }

// Encode encodes text at error-correction level M (15 % of the symbol may be unreadable), the usual
// choice for a code read from a screen.
func Encode(text string) (Code, error) {
	c, err := qr.Encode(text, qr.M)
	if err != nil {
		return Code{}, fmt.Errorf("qrcode: %w", err)
	}
	return Code{c}, nil
}

// Size is the number of modules on a side, quiet zone included.
func (c Code) Size() int { return c.c.Size + 2*QuietZone }

// Dark reports whether the module at (x, y) is dark; (0, 0) is the top left of the quiet zone.
func (c Code) Dark(x, y int) bool { return c.c.Black(x-QuietZone, y-QuietZone) }

// SVG draws the code as an SVG element, dark modules on a light square whatever the page's colour
// scheme (scanners expect dark on light), scaled to its container, and named label for assistive
// technology. It has no style attribute, so that a page's Content-Security-Policy need not allow one.
func (c Code) SVG(label string) template.HTML {
	n := c.Size()
	var d strings.Builder
	for y := range n {
		for x := range n {
			if c.Dark(x, y) {
				fmt.Fprintf(&d, "M%d %dh1v1h-1z", x, y)
			}
		}
	}
	return template.HTML(fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" role="img" aria-label="%s" `+
		`shape-rendering="crispEdges"><rect width="%d" height="%d" fill="#fff"/><path fill="#000" d="%s"/></svg>`,
		n, n, template.HTMLEscapeString(label), n, n, d.String()))
}
