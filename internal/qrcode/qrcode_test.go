package qrcode

import (
	"encoding/xml"
	"fmt"
	"image"
	"image/color"
	"strings"
	"testing"

	"github.com/makiuchi-d/gozxing"
	gozxingqr "github.com/makiuchi-d/gozxing/qrcode"
)

const uri = "otpauth://totp/Kassa:owner@example.com?algorithm=SHA1&digits=6&issuer=Kassa&period=30&secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"

// TestDecodesWithAnIndependentReader: the modules, quiet zone included, drawn as an image and read by
// ZXing's decoder (the Go port), give back the text.
func TestDecodesWithAnIndependentReader(t *testing.T) {
	c, err := Encode(uri)
	if err != nil {
		t.Fatal(err)
	}
	const scale = 4
	img := image.NewGray(image.Rect(0, 0, c.Size()*scale, c.Size()*scale))
	for y := range c.Size() * scale {
		for x := range c.Size() * scale {
			v := uint8(255)
			if c.Dark(x/scale, y/scale) {
				v = 0
			}
			img.SetGray(x, y, color.Gray{Y: v})
		}
	}
	for x := range c.Size() {
		for _, y := range []int{0, QuietZone - 1, c.Size() - 1} {
			if c.Dark(x, y) || c.Dark(y, x) {
				t.Fatalf("module (%d, %d) of the quiet zone is dark", x, y)
			}
		}
	}
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		t.Fatal(err)
	}
	res, err := gozxingqr.NewQRCodeReader().Decode(bmp, nil)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if res.GetText() != uri {
		t.Errorf("decoded %q, want %q", res.GetText(), uri)
	}
}

// TestSVGDrawsEachDarkModule: the SVG's path has one unit square per dark module, at its place, on a
// white square of the code's size, and its label is escaped.
func TestSVGDrawsEachDarkModule(t *testing.T) {
	c, err := Encode(uri)
	if err != nil {
		t.Fatal(err)
	}
	var svg struct {
		ViewBox string `xml:"viewBox,attr"`
		Label   string `xml:"aria-label,attr"`
		Role    string `xml:"role,attr"`
		Rect    struct {
			Fill string `xml:"fill,attr"`
		} `xml:"rect"`
		Path struct {
			Fill string `xml:"fill,attr"`
			D    string `xml:"d,attr"`
		} `xml:"path"`
	}
	if err := xml.Unmarshal([]byte(c.SVG(`Scan <this> "code"`)), &svg); err != nil {
		t.Fatalf("not XML: %v", err)
	}
	n := c.Size()
	if svg.ViewBox != fmt.Sprintf("0 0 %d %d", n, n) || svg.Label != `Scan <this> "code"` || svg.Role != "img" ||
		svg.Rect.Fill != "#fff" || svg.Path.Fill != "#000" {
		t.Fatalf("svg %+v", svg)
	}
	drawn := map[[2]int]bool{}
	for _, sq := range strings.Split(strings.TrimSuffix(svg.Path.D, "z"), "z") {
		var x, y int
		if _, err := fmt.Sscanf(sq, "M%d %dh1v1h-1", &x, &y); err != nil {
			t.Fatalf("square %q: %v", sq, err)
		}
		drawn[[2]int{x, y}] = true
	}
	for y := range n {
		for x := range n {
			if c.Dark(x, y) != drawn[[2]int{x, y}] {
				t.Fatalf("module (%d, %d): dark %v, drawn %v", x, y, c.Dark(x, y), drawn[[2]int{x, y}])
			}
		}
	}
}
