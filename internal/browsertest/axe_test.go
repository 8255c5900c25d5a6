package browsertest_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kassapay/kassa/internal/browsertest"
)

func TestMain(m *testing.M) { os.Exit(browsertest.Main(m)) }

// pages are served as Kassa serves its own: under a Content-Security-Policy that allows no script
// at all, so that axe-core can only be in them through the DevTools protocol.
var pages = map[string]string{
	// Nothing to find: lang, title, a main landmark, a heading, labelled fields, enough contrast.
	"/clean": `<main><h1>Pay</h1><form><label for="n">Name</label><input id="n"><button>Pay</button></form>
		<img src="data:," alt="Logo" width="1" height="1"></main>`,
	// An image without alt text and a field without a label: both critical.
	"/broken": `<main><h1>Pay</h1><img src="data:," width="1" height="1"><form><input id="n"><button>Pay</button></form></main>`,
	// Grey on black, in dark mode only: serious, and only found when dark is emulated.
	"/dark": `<main><h1>Pay</h1><p>Total: 10.00 CAD</p></main>`,
	// Pale text on white, at 375 px wide only.
	"/narrow": `<main><h1>Pay</h1><p>Total: 10.00 CAD</p></main>`,
	// Fields whose borders barely show, in light and in dark.
	"/faint": `<main><h1>Pay</h1><form><label for="n">Name</label><input id="n"><label for="c">Card</label><select id="c"><option>Visa</select>
		<label for="ok">Note</label><input id="ok" class="ok"></form></main>`,
}

var styles = map[string]string{
	"/dark":   `@media (prefers-color-scheme: dark) { body { color: #eee; background: #000; } p { color: #333; } }`,
	"/narrow": `@media (max-width: 400px) { p { color: #ccc; } }`,
	"/faint": `input, select { background: transparent; color: inherit; border: 1px solid #d0d7de; } input.ok { border-color: #6e7781; }
		@media (prefers-color-scheme: dark) { body { color: #eee; background: #161b22; } input, select { border-color: #30363d; }
		input.ok { border-color: #161b22; background: #6e7781; } }`,
}

func pageServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Security-Policy", "default-src 'none'; img-src data:; style-src 'nonce-n0nce'")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>Test page</title>
<style nonce="n0nce">body { color: #111; background: #fff; } %s</style></head><body>%s</body></html>`, styles[r.URL.Path], body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// recorder stands in for a test: it keeps what CheckAccessibility reports as a failure.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) report() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.errors, "\n")
}

func rules(vs []browsertest.Violation) []string {
	var ids []string
	for _, v := range vs {
		if v.Blocking() {
			ids = append(ids, v.Rule+":"+v.Impact+":"+strings.Join(v.Targets, ","))
		}
	}
	slices.Sort(ids)
	return ids
}

func TestAxe(t *testing.T) {
	t.Parallel()
	srv := pageServer(t)
	ctx := browsertest.New(t)
	open := func(path string) {
		browsertest.Step(t, ctx, 30*time.Second, chromedp.Navigate(srv.URL+path), chromedp.WaitVisible(chromedp.CSS("h1")))
	}

	t.Run("a clean page passes, in every mode", func(t *testing.T) {
		open("/clean")
		if vs := browsertest.Axe(t, ctx); len(vs) != 0 {
			t.Fatalf("violations on a clean page: %v", vs)
		}
		browsertest.CheckAccessibilityEverywhere(t, ctx, "clean page")
		// The page's CSP let no script in: axe-core came through the DevTools protocol.
		if csp := browsertest.Eval[bool](t, ctx, `document.scripts.length === 0 && typeof axe === 'object'`); !csp {
			t.Fatal("axe-core is not in the page, or came as a script element")
		}
	})

	t.Run("an image without alt and a field without a label are reported", func(t *testing.T) {
		open("/broken")
		got := rules(browsertest.Axe(t, ctx))
		want := []string{"image-alt:critical:img", "label:critical:#n"}
		if !slices.Equal(got, want) {
			t.Fatalf("violations %v; want %v", got, want)
		}
		rec := &recorder{TB: t}
		browsertest.CheckAccessibility(rec, ctx, "broken page")
		report := rec.report()
		for _, s := range []string{"broken page: 2 serious or critical violations", "image-alt (critical)", "label (critical)",
			"at #n", "https://dequeuniversity.com/rules/axe/" + browsertest.AxeVersion[:strings.LastIndex(browsertest.AxeVersion, ".")] + "/image-alt"} {
			if !strings.Contains(report, s) {
				t.Fatalf("the report does not say %q:\n%s", s, report)
			}
		}
	})

	t.Run("a contrast fault of dark mode is found in dark only", func(t *testing.T) {
		open("/dark")
		if got := rules(browsertest.Axe(t, ctx)); len(got) != 0 {
			t.Fatalf("in light: %v", got)
		}
		browsertest.ColorScheme(t, ctx, "dark")
		if got := rules(browsertest.Axe(t, ctx)); !slices.Equal(got, []string{"color-contrast:serious:p"}) {
			t.Fatalf("in dark: %v", got)
		}
		browsertest.ColorScheme(t, ctx, "")
		rec := &recorder{TB: t}
		browsertest.CheckAccessibilityEverywhere(rec, ctx, "dark page")
		if r := rec.report(); strings.Count(r, "color-contrast (serious)") != 2 || !strings.Contains(r, "dark page, dark, desktop") ||
			!strings.Contains(r, "dark page, dark, 375 px") || strings.Contains(r, "light") {
			t.Fatalf("report:\n%s", r)
		}
	})

	t.Run("a fault at 375 px wide is found at that width only", func(t *testing.T) {
		open("/narrow")
		if got := rules(browsertest.Axe(t, ctx)); len(got) != 0 {
			t.Fatalf("at the browser's width: %v", got)
		}
		browsertest.Viewport(t, ctx, browsertest.Phone)
		if w := browsertest.Eval[int](t, ctx, `innerWidth`); w != 375 {
			t.Fatalf("innerWidth %d at 375 px", w)
		}
		if got := rules(browsertest.Axe(t, ctx)); !slices.Equal(got, []string{"color-contrast:serious:p"}) {
			t.Fatalf("at 375 px: %v", got)
		}
		rec := &recorder{TB: t}
		browsertest.CheckAccessibilityEverywhere(rec, ctx, "narrow page")
		if r := rec.report(); strings.Count(r, "color-contrast (serious)") != 2 || strings.Contains(r, "desktop") {
			t.Fatalf("report:\n%s", r)
		}
		if w := browsertest.Eval[int](t, ctx, `innerWidth`); w == 375 {
			t.Fatal("the check left the tab at 375 px")
		}
	})
}

// Fields that cannot be made out are reported, with their contrast, in light and in dark; a field
// whose border, or whose own background, stands out is not.
func TestFieldContrast(t *testing.T) {
	t.Parallel()
	srv := pageServer(t)
	ctx := browsertest.New(t)
	browsertest.Step(t, ctx, 30*time.Second, chromedp.Navigate(srv.URL+"/faint"), chromedp.WaitVisible(chromedp.CSS("h1")))
	for scheme, want := range map[string]string{"light": "#n (1.45:1),#c (1.45:1)", "dark": "#n (1.42:1),#c (1.42:1)"} {
		browsertest.ColorScheme(t, ctx, scheme)
		vs := browsertest.FieldContrast(t, ctx)
		if len(vs) != 1 || vs[0].Rule != "field-boundary-contrast" || !vs[0].Blocking() || strings.Join(vs[0].Targets, ",") != want {
			t.Fatalf("%s: %v; want %s", scheme, vs, want)
		}
	}
	browsertest.Step(t, ctx, 30*time.Second, chromedp.Navigate(srv.URL+"/clean"), chromedp.WaitVisible(chromedp.CSS("h1")))
	if vs := browsertest.FieldContrast(t, ctx); len(vs) != 0 {
		t.Fatalf("the browser's own fields: %v", vs)
	}
}

// The version the tests pin is the one scripts/test-deps.sh installs.
func TestAxeVersionInstalled(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../scripts/test-deps.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\naxe_core_version="+browsertest.AxeVersion+"\n") {
		t.Fatalf("scripts/test-deps.sh does not install axe-core %s", browsertest.AxeVersion)
	}
}
