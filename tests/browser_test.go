package tests

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// startBrowser starts headless Chromium with a profile of its own,
// recording the console and each page's CSP violations (window.__csp) from
// before any of its scripts runs. The returned context bounds the visit by
// limit: a bound on a hang, not a measure of speed. Chromium must be
// installed (make test runs scripts/ensure-chromium.sh); a missing one
// fails the test.
func startBrowser(t *testing.T, limit time.Duration) (context.Context, *consoleLines) {
	t.Helper()
	bin := chromiumPath()
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("Chromium is needed at %s (%v): run scripts/ensure-chromium.sh, or set CHROMIUM", bin, err)
	}
	// A profile of its own; Chromium's helpers may still write in it for
	// a moment after it exits, so its removal is retried.
	profile, err := os.MkdirTemp("", "nornweave-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for range 50 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	ctx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(profile),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		// Nothing of Chromium's own leaves loopback (make test's netguard
		// counts every attempt): no name resolves but the server's, and
		// the services that phone home without a name are off.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		chromedp.Flag("disable-features", "MediaRouter,OptimizationHints,Translate,NetworkTimeServiceQuerying,"+
			"CertificateTransparencyComponentUpdater,AutofillServerCommunication,DialMediaRouteProvider"),
		chromedp.Flag("disable-domain-reliability", true), chromedp.Flag("no-pings", true),
		chromedp.Flag("disable-client-side-phishing-detection", true), chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true), chromedp.Flag("dns-prefetch-disable", true),
		chromedp.Flag("disable-breakpad", true), chromedp.Flag("metrics-recording-only", true),
		chromedp.WindowSize(1280, 1000))
	t.Cleanup(cancelAlloc)
	ctx, cancelBrowser := chromedp.NewContext(ctx)
	t.Cleanup(cancelBrowser)
	// The browser starts with the first call, which must not carry the
	// timeout (it would stop the browser); the steps after it do. The
	// console is read as it comes, until the browser stops.
	console := collectConsole(ctx)
	// securitypolicyviolation events, recorded from before any script of
	// the page runs: the page's own view of its CSP.
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `window.__csp = []; document.addEventListener("securitypolicyviolation",
			e => window.__csp.push(e.violatedDirective + " " + e.blockedURI));`,
	}); err != nil {
		t.Fatalf("Chromium did not start: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	t.Cleanup(cancel)
	return ctx, console
}
