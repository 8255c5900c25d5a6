// Package browsertest gives tests a real browser: Debian's headless Chromium, driven through
// chromedp, one per test binary with a fresh profile and no background networking, and a browser
// context of its own for each test. When Chromium is missing the test
// skips with the reason, unless KASSA_REQUIRE_ALL=1, which makes it fail.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kassapay/kassa/internal/store/storetest"
)

// debianChromium is the browser itself behind Debian's /usr/bin/chromium, a shell launcher that
// sources /etc/chromium.d first. One of those scripts tests the space left on /dev/shm with findmnt,
// which failed once ("[: unexpected operator") while another test mounted a tmpfs, and the browser
// did not start; the flag that script adds, --disable-dev-shm-usage, chromedp passes anyway.
const debianChromium = "/usr/lib/chromium/chromium"

// ExecPath finds Chromium: $KASSA_CHROMIUM, Debian's browser binary, or chromium / chromium-browser /
// google-chrome on PATH.
func ExecPath() (string, bool) {
	if p := os.Getenv("KASSA_CHROMIUM"); p != "" {
		return p, true
	}
	if _, err := os.Stat(debianChromium); err == nil {
		return debianChromium, true
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, true
		}
	}
	return "", false
}

// Tab opens a new tab of the browser of ctx and returns its context; the tab closes when t ends.
func Tab(t testing.TB, ctx context.Context) context.Context {
	t.Helper()
	tab, cancel := chromedp.NewContext(ctx)
	t.Cleanup(cancel)
	// As in New and Frame: the first Run creates the tab, which lives as long as that Run's context.
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("browser: open a tab: %v", err)
	}
	return tab
}

// New returns a context for chromedp actions in a new tab of t's own: a tab in a browser context of
// its own (as an incognito window: cookies, storage and cache of its own, none from another test) of
// the test binary's one browser, which the first New starts and Main stops. The tab and its browser
// context close when t ends. Bound each action with a context derived from the returned one (a timeout
// on the returned context itself would close the tab).
//
// One browser serves the whole binary because starting Chromium takes seconds, under the race
// detector and on a busy machine more, and a browser context isolates tests as a fresh profile did.
func New(t testing.TB) context.Context {
	t.Helper()
	if !inMain.Load() {
		t.Fatal("browsertest.New: the package's TestMain must run its tests through browsertest.Main, which stops the browser")
	}
	path, ok := ExecPath()
	if !ok {
		storetest.Unavailable(t, "Chromium is not installed (Debian: apt-get install chromium)")
	}
	b, err := sharedBrowser(path)
	if err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	ctx, cancel := chromedp.NewContext(b, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	// As in Tab and Frame: the first Run creates the tab, which lives as long as that Run's context.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("browser: open a tab: %v", err)
	}
	return ctx
}

// Main runs the tests as storetest.Main does, then stops the browser that New started, if it did. A
// package whose tests call New runs them through it:
//
//	func TestMain(m *testing.M) { os.Exit(browsertest.Main(m)) }
func Main(m *testing.M) int {
	inMain.Store(true)
	code := storetest.Main(m)
	browser.mu.Lock()
	defer browser.mu.Unlock()
	if browser.stop != nil {
		browser.stop()
	}
	return code
}

// inMain is set by Main: New refuses to start a browser that nothing would stop.
var inMain atomic.Bool

// browser is the test binary's Chromium, with a fresh profile in a temporary directory that stopping
// it removes.
var browser struct {
	mu   sync.Mutex
	ctx  context.Context // the browser's first tab; done once the browser has stopped
	stop func()
}

// sharedBrowser returns the context of the browser's first tab, starting the browser on first use, or
// again when it has stopped.
func sharedBrowser(path string) (context.Context, error) {
	browser.mu.Lock()
	defer browser.mu.Unlock()
	if browser.ctx != nil && browser.ctx.Err() == nil {
		return browser.ctx, nil
	}
	if browser.stop != nil {
		browser.stop()
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	browser.ctx, browser.stop = ctx, func() {
		cancelCtx()
		cancelAlloc()
		browser.ctx, browser.stop = nil, nil
	}
	if err := chromedp.Do(ctx); err != nil { // the first run starts the browser
		browser.stop()
		return nil, err
	}
	return ctx, nil
}

// Step runs chromedp actions on ctx's tab, failing t when they do not complete within d.
func Step(t testing.TB, ctx context.Context, d time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := chromedp.Do(sctx, steps...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// Eval evaluates a JavaScript expression in ctx's tab and returns its value.
func Eval[T any](t testing.TB, ctx context.Context, expr string) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("browser: evaluate %q: %v", expr, err)
	}
	return v
}

// Frame returns a context for chromedp actions inside the cross-origin iframe whose URL starts with
// prefix, once it exists (within 30 s), in ctx's browser context (so never in another test's). Chromium
// runs such a frame in a process of its own, as a target of its own: actions on the page's context do
// not reach into it.
func Frame(t testing.TB, ctx context.Context, prefix string) context.Context {
	t.Helper()
	own := chromedp.FromContext(ctx).BrowserContextID
	deadline := time.Now().Add(30 * time.Second)
	for {
		targets, err := chromedp.Targets(ctx)
		if err != nil {
			t.Fatalf("browser: list targets: %v", err)
		}
		for _, ti := range targets {
			if ti.Type == "iframe" && ti.BrowserContextID == own && strings.HasPrefix(ti.URL, prefix) {
				fctx, cancel := chromedp.NewContext(ctx, chromedp.WithTargetID(ti.TargetID))
				t.Cleanup(cancel)
				// The first Run attaches, and the target lives as long as that Run's context: run it
				// on fctx itself, not on a context with a timeout.
				if err := chromedp.Do(fctx); err != nil {
					t.Fatalf("browser: attach to the frame of %s: %v", prefix, err)
				}
				return fctx
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("browser: no frame of %s within 30 s", prefix)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
