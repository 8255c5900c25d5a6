package browsertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/kassapay/kassa/internal/store/storetest"
)

// AxeVersion is the axe-core release the accessibility checks run, pinned exactly: a new release
// adds rules, and a page that passed must not fail without a change of ours. scripts/test-deps.sh
// installs the same version.
const AxeVersion = "4.14.1"

// AxePath is where the tests find axe-core's axe.min.js: $KASSA_AXE_CORE when set, else where
// scripts/test-deps.sh installs it, under the user's cache directory
// (${XDG_CACHE_HOME:-~/.cache}/kassa/axe-core-VERSION/node_modules/axe-core/axe.min.js).
func AxePath() string {
	if p := os.Getenv("KASSA_AXE_CORE"); p != "" {
		return p
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "kassa", "axe-core-"+AxeVersion, "node_modules", "axe-core", "axe.min.js")
}

var axeSource = sync.OnceValues(func() (string, error) {
	p := AxePath()
	if p == "" {
		return "", fmt.Errorf("no cache directory to find axe-core in: set KASSA_AXE_CORE to its axe.min.js")
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("axe-core %s is not installed (%v): run scripts/test-deps.sh, or "+
			"npm install --prefix DIR axe-core@%s and set KASSA_AXE_CORE=DIR/node_modules/axe-core/axe.min.js", AxeVersion, err, AxeVersion)
	}
	return string(b), nil
})

// Violation is one axe-core rule that a page breaks, with the elements that break it.
type Violation struct {
	Rule    string   `json:"id"`      // the rule's id, e.g. "color-contrast"
	Impact  string   `json:"impact"`  // minor, moderate, serious or critical
	Help    string   `json:"help"`    // what the rule asks, in a sentence
	HelpURL string   `json:"helpUrl"` // Deque's page on the rule
	Targets []string `json:"targets"` // a CSS selector of each element that breaks it
}

// String is the violation as a test reports it: rule, impact, help, targets and the help page.
func (v Violation) String() string {
	return fmt.Sprintf("%s (%s): %s\n    at %s\n    see %s", v.Rule, v.Impact, v.Help, strings.Join(v.Targets, ", "), v.HelpURL)
}

// Blocking reports whether the violation fails a page: its impact is serious or critical.
func (v Violation) Blocking() bool { return v.Impact == "serious" || v.Impact == "critical" }

// axeRun runs axe-core on the document and answers its violations, each with the selectors of its
// elements. Frames are not followed (iframes: false): axe would have to be in each of them to
// answer, and a cross-origin frame is a target of its own, checked through Frame.
const axeRun = `axe.run(document, {iframes: false, resultTypes: ['violations']}).then(r => r.violations.map(v => ({
	id: v.id, impact: v.impact, help: v.help, helpUrl: v.helpUrl,
	targets: v.nodes.map(n => n.target.flat(Infinity).join(' ')) })))`

// Axe runs axe-core on the document of ctx's tab (or frame, from Frame) as it stands, and answers
// every violation, whatever its impact. axe-core is put into the page through the DevTools
// protocol (Runtime.evaluate), which the page's Content-Security-Policy does not govern: nothing of
// it is served by Kassa, and nothing is fetched. When axe-core is not installed, t skips with how to
// install it (and fails under KASSA_REQUIRE_ALL=1).
func Axe(t testing.TB, ctx context.Context) []Violation {
	t.Helper()
	src, err := axeSource()
	if err != nil {
		storetest.Unavailable(t, "%v", err)
	}
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	version, err := chromedp.Run(sctx, chromedp.Evaluate[string](`typeof axe === 'object' ? axe.version : ''`))
	if err == nil && version == "" {
		if _, err = chromedp.Run(sctx, chromedp.Evaluate[chromedp.Void](src)); err == nil {
			version, err = chromedp.Run(sctx, chromedp.Evaluate[string](`axe.version`))
		}
	}
	if err != nil {
		t.Fatalf("browser: put axe-core into the page: %v", err)
	}
	if version != AxeVersion {
		t.Fatalf("axe-core %s is in the page (from %s); the tests pin %s", version, AxePath(), AxeVersion)
	}
	vs, err := chromedp.Run(sctx, chromedp.Evaluate[[]Violation](axeRun, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("browser: run axe-core: %v", err)
	}
	return vs
}

// fieldContrast finds the visible form fields whose boundary, a border or their own background,
// has less than 3:1 contrast with what surrounds them. Colours with transparency are laid over the
// background below them; a page's own background is white, as the browser's is. Check boxes and
// radio buttons the browser draws itself (appearance: auto) are left out: their computed style says
// nothing of the box the browser draws, in its own colours for the page's colour scheme.
const fieldContrast = `(() => {
	const rgba = s => { const m = s.match(/rgba?\(([^)]*)\)/); if (!m) return [255, 255, 255, 1];
		const v = m[1].split(/[ ,\/]+/).filter(Boolean).map(Number); return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1]; };
	const over = (top, below) => top.map((c, i) => i < 3 ? c * top[3] + below[i] * (1 - top[3]) : 1);
	const behind = el => { const chain = []; for (let e = el; e; e = e.parentElement) chain.unshift(rgba(getComputedStyle(e).backgroundColor));
		return chain.reduce((below, top) => over(top, below), [255, 255, 255, 1]); };
	const lum = c => { const l = c.slice(0, 3).map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
		return 0.2126 * l[0] + 0.7152 * l[1] + 0.0722 * l[2]; };
	const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
	const out = [];
	for (const el of document.querySelectorAll('input:not([type=hidden]), select, textarea')) {
		if (el.disabled || !el.getClientRects().length || getComputedStyle(el).visibility !== 'visible') continue;
		if ((el.type === 'checkbox' || el.type === 'radio') && getComputedStyle(el).appearance === 'auto') continue;
		const st = getComputedStyle(el), outside = el.parentElement ? behind(el.parentElement) : [255, 255, 255, 1];
		let best = ratio(behind(el), outside);
		if (parseFloat(st.borderTopWidth) > 0 && st.borderTopStyle !== 'none') best = Math.max(best, ratio(over(rgba(st.borderTopColor), outside), outside));
		if (best < 3) out.push((el.id ? '#' + el.id : el.tagName.toLowerCase()) + ' (' + best.toFixed(2) + ':1)');
	}
	return out;
})()`

// FieldContrast checks what axe-core does not: that each visible form field of the document of ctx
// can be made out, its border or its background standing at 3:1 against what surrounds it ("Visual
// information required to identify user interface components and states" has "a contrast ratio of
// at least 3:1 against adjacent color(s)", WCAG 2.2, 1.4.11 Non-text Contrast). It answers one
// serious violation naming the fields that fall short, or none.
func FieldContrast(t testing.TB, ctx context.Context) []Violation {
	t.Helper()
	faint := Eval[[]string](t, ctx, fieldContrast)
	if len(faint) == 0 {
		return nil
	}
	return []Violation{{Rule: "field-boundary-contrast", Impact: "serious",
		Help:    "Form fields must stand out at 3:1 from what surrounds them, by border or background (WCAG 1.4.11)",
		HelpURL: "https://www.w3.org/WAI/WCAG22/Understanding/non-text-contrast.html", Targets: faint}}
}

// CheckAccessibility runs axe-core (see Axe) and FieldContrast on the document of ctx, and fails t
// listing each serious or critical violation; lesser ones are logged. name says which page, and in
// which mode, for the report.
func CheckAccessibility(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	var blocking, other []string
	for _, v := range append(Axe(t, ctx), FieldContrast(t, ctx)...) {
		if v.Blocking() {
			blocking = append(blocking, v.String())
		} else {
			other = append(other, v.String())
		}
	}
	if len(other) > 0 {
		t.Logf("axe-core on %s, minor or moderate:\n  %s", name, strings.Join(other, "\n  "))
	}
	if len(blocking) > 0 {
		t.Errorf("axe-core on %s: %d serious or critical violations:\n  %s", name, len(blocking), strings.Join(blocking, "\n  "))
	}
}

// ColorScheme makes the document of ctx match `prefers-color-scheme: scheme` ("light" or "dark";
// "" ends the emulation), through Emulation.setEmulatedMedia. A frame from Frame is a target of
// its own, and takes its own.
func ColorScheme(t testing.TB, ctx context.Context, scheme string) {
	t.Helper()
	p := emulation.SetEmulatedMediaParams{}
	if scheme != "" {
		p.Features = []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}
	}
	Step(t, ctx, 10*time.Second, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, p)
		return chromedp.Void{}, err
	})
}

// Width is a viewport to check pages at.
type Width struct {
	Name          string
	Width, Height int64
	Mobile        bool
}

var (
	// Desktop is a laptop's window.
	Desktop = Width{Name: "desktop", Width: 1280, Height: 800}
	// Phone is the narrowest screen the pages must work on: 375 px wide, as a mobile browser
	// (the page's meta viewport applies).
	Phone = Width{Name: "375 px", Width: 375, Height: 812, Mobile: true}
)

// Viewport makes ctx's tab the size of w. It applies to a tab, not to a frame from Frame, whose
// size its parent page decides.
func Viewport(t testing.TB, ctx context.Context, w Width) {
	t.Helper()
	var opts []chromedp.EmulateViewportOption
	if w.Mobile {
		opts = append(opts, chromedp.EmulateMobile, chromedp.EmulatePortrait)
	}
	Step(t, ctx, 10*time.Second, chromedp.EmulateViewport(w.Width, w.Height, opts...))
}

// CheckAccessibilityEverywhere checks documents with CheckAccessibility in light and in dark, at
// Desktop and at Phone width, then ends both emulations. The widths are set on tab; docs
// are the documents to check, tab's own when none is given, or frames of tab from Frame.
func CheckAccessibilityEverywhere(t testing.TB, tab context.Context, name string, docs ...context.Context) {
	t.Helper()
	if len(docs) == 0 {
		docs = []context.Context{tab}
	}
	for _, w := range []Width{Desktop, Phone} {
		Viewport(t, tab, w)
		for _, scheme := range []string{"light", "dark"} {
			for i, doc := range docs {
				ColorScheme(t, doc, scheme)
				label := fmt.Sprintf("%s, %s, %s", name, scheme, w.Name)
				if len(docs) > 1 {
					label = fmt.Sprintf("%s (document %d)", label, i+1)
				}
				CheckAccessibility(t, doc, label)
			}
		}
	}
	Step(t, tab, 10*time.Second, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, emulation.ClearDeviceMetricsOverride, cdp.Empty{})
		return chromedp.Void{}, err
	})
	for _, doc := range docs {
		ColorScheme(t, doc, "")
	}
}
