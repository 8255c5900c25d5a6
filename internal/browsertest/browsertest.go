// Package browsertest gives tests a real browser: Debian's headless Chromium, driven through
// chromedp, with a fresh profile and no background networking. When Chromium is missing the test
// skips with the reason, unless KASSA_REQUIRE_ALL=1, which makes it fail.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"strings"
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

// New starts a browser for t and returns a context for chromedp actions in its first tab. The
// browser stops when t ends. Bound each action with a context derived from the returned one (a
// timeout on the returned context itself would stop the whole browser).
func New(t testing.TB) context.Context {
	t.Helper()
	path, ok := ExecPath()
	if !ok {
		storetest.Unavailable(t, "Chromium is not installed (Debian: apt-get install chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil { // the first run starts the browser
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
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
// prefix, once it exists (within 30 s). Chromium runs such a frame in a process of its own, as a
// target of its own: actions on the page's context do not reach into it.
func Frame(t testing.TB, ctx context.Context, prefix string) context.Context {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		targets, err := chromedp.Targets(ctx)
		if err != nil {
			t.Fatalf("browser: list targets: %v", err)
		}
		for _, ti := range targets {
			if ti.Type == "iframe" && strings.HasPrefix(ti.URL, prefix) {
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
