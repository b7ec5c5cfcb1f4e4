package tests

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/nornweave/nornweave/core/config"
)

// The dashboard in a real browser (issue 32), on both databases: a server
// with API_KEY, a global limit and an inbox at its limit. Headless
// Chromium is sent from /admin to the login form, stays there with an
// error on a wrong key, logs in with the right one, and reads each
// window's used/limit from the overview's DOM: they equal what
// /v1/rate-limit and /v1/inboxes/{id}/rate-limit answer. Logout returns to
// the form, and /admin sends there again. No page logs to the console or
// violates its CSP; a violation made on purpose at the end proves the
// checks see one. Held, Suppressions, Webhooks and Messages are reached
// through the nav, each marked current, each showing what the API just
// made: a scheduled message with its time, a manual suppression, an
// endpoint without its secret, the sends newest first (filtered by status,
// only the scheduled one) and a sent message's page with its recipient.
func TestAdminInABrowser(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		started := time.Now()
		const key = "admin-page-key"
		s := startDefault(t, driver, func(c *config.Config) {
			c.APIKey = key
			c.SendRateLimitPerMinute, c.SendRateLimitPerHour = 10, 100
			c.InboxSendRateLimitPerMinute = 2
			webhookConfig(c) // http and loopback targets, for the Webhooks page's endpoint
		})
		auth := []string{"X-API-Key", key}
		inbox := s.createInbox(t, "dash", auth...)
		var sent []string // the ids of the two sends the inbox took
		for i, want := range []int{201, 201, 429} {
			r := s.do(t, "POST", "/v1/messages", map[string]any{"inbox_id": inbox, "to": []string{"ann@example.com"},
				"subject": "Hello", "body": "Hi"}, auth...)
			if r.Status != want {
				t.Fatalf("send %d = %d, want %d: %s", i+1, r.Status, want, r.Body)
			}
			if want == 201 {
				sent = append(sent, r.JSON(t)["id"].(string))
			}
		}
		// The per-second window empties a second after the sends; until it
		// has, the page and the API could read it a second apart.
		for deadline := time.Now().Add(5 * time.Second); ; {
			var rl struct {
				PerSecond struct{ Used int } `json:"per_second"`
			}
			if err := json.Unmarshal(s.do(t, "GET", "/v1/rate-limit", nil, auth...).Body, &rl); err != nil {
				t.Fatal(err)
			}
			if rl.PerSecond.Used == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the per-second window still counts %d sends after 5 s", rl.PerSecond.Used)
			}
			time.Sleep(100 * time.Millisecond)
		}

		ctx, console := startBrowser(t, 2*time.Minute)
		css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
		run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
			t.Helper()
			if err := chromedp.Do(ctx, steps...); err != nil {
				t.Fatalf("%s: %v\nconsole:\n%s", what, err, strings.Join(console.waitCSP(ctx, 0), "\n"))
			}
		}
		eval := func(js string) string {
			t.Helper()
			v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
			if err != nil {
				t.Fatalf("%s: %v", js, err)
			}
			return v
		}
		var violations []string
		pageCSP := func(where string) {
			t.Helper()
			if v := eval(`window.__csp.join("\n")`); v != "" {
				violations = append(violations, where+": "+v)
			}
		}

		run("open /admin", chromedp.Navigate(s.URL+"/admin"), chromedp.WaitVisible(css("#api_key")))
		if p := eval(`location.pathname`); p != "/admin/login" {
			t.Errorf("/admin without a session is at %s, want /admin/login", p)
		}
		// Only admin.css sets this: a stylesheet blocked by the CSP leaves
		// the browser's white.
		if bg := eval(`getComputedStyle(document.body).backgroundColor`); bg != "rgb(246, 247, 249)" {
			t.Errorf("the login page is not styled by admin.css: body background %q", bg)
		}
		pageCSP("login")
		run("log in with a wrong key", chromedp.SendKeys(css("#api_key"), "not-the-key"),
			chromedp.Click(css("button[type=submit]")), chromedp.WaitVisible(css("#login-error")))
		if p, msg := eval(`location.pathname`), eval(`document.querySelector("#login-error").textContent`); p != "/admin/login" || msg != "Wrong key." {
			t.Errorf("after a wrong key: at %s saying %q, want /admin/login saying \"Wrong key.\"", p, msg)
		}
		pageCSP("wrong key")
		run("log in with the key", chromedp.SendKeys(css("#api_key"), key),
			chromedp.Click(css("button[type=submit]")), chromedp.WaitVisible(css("#global")))
		if p := eval(`location.pathname`); p != "/admin" {
			t.Errorf("after the key: at %s, want /admin", p)
		}
		pageCSP("overview")

		ratios := func(scope string) map[string]string {
			t.Helper()
			var m map[string]string
			js := fmt.Sprintf(`JSON.stringify(Object.fromEntries([...document.querySelectorAll(%q)].map(
				r => [r.dataset.window, r.querySelector(".ratio").textContent])))`, scope+" tr.window")
			if err := json.Unmarshal([]byte(eval(js)), &m); err != nil {
				t.Fatal(err)
			}
			return m
		}
		want := func(path string) map[string]string {
			t.Helper()
			var rl map[string]json.RawMessage
			if err := json.Unmarshal(s.do(t, "GET", path, nil, auth...).Body, &rl); err != nil {
				t.Fatal(err)
			}
			m := map[string]string{}
			for name, raw := range rl {
				var w struct{ Limit, Used int }
				if !strings.HasPrefix(name, "per_") || json.Unmarshal(raw, &w) != nil {
					continue // unit
				}
				if w.Limit == 0 {
					m[name] = fmt.Sprintf("%d/∞", w.Used)
				} else {
					m[name] = fmt.Sprintf("%d/%d", w.Used, w.Limit)
				}
			}
			return m
		}
		global, inboxWindows := ratios("#global"), ratios(fmt.Sprintf(`[data-inbox=%q]`, inbox))
		if w := want("/v1/rate-limit"); fmt.Sprint(global) != fmt.Sprint(w) {
			t.Errorf("the page's global windows %v, /v1/rate-limit %v", global, w)
		}
		if w := want("/v1/inboxes/" + inbox + "/rate-limit"); fmt.Sprint(inboxWindows) != fmt.Sprint(w) {
			t.Errorf("the page's inbox windows %v, /v1/inboxes/%s/rate-limit %v", inboxWindows, inbox, w)
		}
		// What the setup makes them, so that agreeing on nothing fails.
		if global["per_minute"] != "2/10" || global["per_hour"] != "2/100" || inboxWindows["per_minute"] != "2/2" {
			t.Errorf("global %v, inbox %v; want per_minute 2/10, per_hour 2/100 and the inbox's per_minute 2/2",
				global, inboxWindows)
		}

		// The list pages, reached through the nav: a message scheduled an
		// hour ahead on Held with its time, a manual suppression, and a
		// webhook endpoint without its secret.
		at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
		r := s.do(t, "POST", "/v1/messages", map[string]any{"inbox_id": inbox, "to": []string{"bea@example.com"},
			"subject": "Later <b>", "body": "Hi", "scheduled_at": at.Format(time.RFC3339)}, auth...)
		if r.Status != 201 && r.Status != 202 {
			t.Fatalf("scheduled send = %d: %s", r.Status, r.Body)
		}
		scheduled := r.JSON(t)["id"].(string)
		if r := s.do(t, "POST", "/v1/suppressions", map[string]any{"email": "gone@example.com", "reason": "manual"}, auth...); r.Status != 201 {
			t.Fatalf("suppression = %d: %s", r.Status, r.Body)
		}
		r = s.do(t, "POST", "/v1/webhooks", map[string]any{"url": "http://127.0.0.1:9/dash-hook", "events": []string{"message.sent"}}, auth...)
		if r.Status != 201 {
			t.Fatalf("webhook = %d: %s", r.Status, r.Body)
		}
		hook, secret := r.JSON(t)["id"].(string), r.JSON(t)["secret"].(string)
		current := func(want string) {
			t.Helper()
			if p, cur := eval(`location.pathname`), eval(`document.querySelector('header nav a[aria-current="page"]').getAttribute("href")`); p != want || cur != want {
				t.Errorf("at %s with %s marked current, want %s for both", p, cur, want)
			}
		}
		run("open Held from the nav", chromedp.Click(css(`header nav a[href="/admin/held"]`)),
			chromedp.WaitVisible(css(fmt.Sprintf(`tr[data-message=%q]`, scheduled))))
		current("/admin/held")
		row := fmt.Sprintf(`document.querySelector('tr[data-message=%q]')`, scheduled)
		if st, subj, when := eval(row+`.querySelector(".status").textContent`), eval(row+`.querySelector(".subject").textContent`),
			eval(row+`.querySelector(".scheduled time").getAttribute("datetime")`); st != "scheduled" || subj != "Later <b>" || when != at.Format(time.RFC3339) {
			t.Errorf("Held row: %q %q at %q, want scheduled \"Later <b>\" at %s", st, subj, when, at.Format(time.RFC3339))
		}
		pageCSP("held")
		run("open Suppressions from the nav", chromedp.Click(css(`header nav a[href="/admin/suppressions"]`)),
			chromedp.WaitVisible(css("tr.suppression")))
		current("/admin/suppressions")
		if got := eval(`[...document.querySelectorAll("tr.suppression")].map(r => r.querySelector(".email").textContent + " " + r.querySelector(".reason").textContent).join("|")`); got != "gone@example.com manual" {
			t.Errorf("Suppressions rows %q, want \"gone@example.com manual\"", got)
		}
		pageCSP("suppressions")
		run("open Webhooks from the nav", chromedp.Click(css(`header nav a[href="/admin/webhooks"]`)),
			chromedp.WaitVisible(css(fmt.Sprintf(`section[data-endpoint=%q]`, hook))))
		current("/admin/webhooks")
		if u := eval(`document.querySelector("section.endpoint .url").textContent`); u != "http://127.0.0.1:9/dash-hook" {
			t.Errorf("Webhooks endpoint URL %q", u)
		}
		if strings.Contains(eval(`document.documentElement.outerHTML`), secret) {
			t.Errorf("the Webhooks page holds the endpoint's secret")
		}
		pageCSP("webhooks")

		// Messages, newest first: the scheduled one and the two sends; the
		// 429'd send is no message. Filtered by status, only the scheduled
		// one; a sent one's page shows its status and its recipient.
		run("open Messages from the nav", chromedp.Click(css(`header nav a[href="/admin/messages"]`)),
			chromedp.WaitVisible(css(fmt.Sprintf(`tr[data-message=%q]`, sent[0]))))
		current("/admin/messages")
		listed := func() string {
			t.Helper()
			return eval(`[...document.querySelectorAll("tr.message")].map(r => r.dataset.message + " " +
				r.querySelector(".subject").textContent + " " + r.querySelector(".status").textContent).join("|")`)
		}
		if got, want := listed(), fmt.Sprintf("%s Later <b> scheduled|%s Hello sent|%s Hello sent", scheduled, sent[1], sent[0]); got != want {
			t.Errorf("Messages rows %q, want %q", got, want)
		}
		if to := eval(fmt.Sprintf(`document.querySelector('tr[data-message=%q] .to').textContent`, sent[0])); to != "ann@example.com" {
			t.Errorf("Messages row's To %q, want ann@example.com", to)
		}
		pageCSP("messages")
		eval(`document.querySelector("#status").value = "scheduled"; ""`)
		run("filter Messages by status", chromedp.Click(css("form.filter button")),
			chromedp.WaitNotPresent(css(fmt.Sprintf(`tr[data-message=%q]`, sent[0]))),
			chromedp.WaitVisible(css(fmt.Sprintf(`tr[data-message=%q]`, scheduled))))
		if got, want := listed(), scheduled+" Later <b> scheduled"; got != want {
			t.Errorf("Messages rows with status=scheduled %q, want %q", got, want)
		}
		if q := eval(`location.search`); q != "?inbox_id=&status=scheduled&since=&until=" {
			t.Errorf("the filter's query %q", q)
		}
		pageCSP("messages filtered")
		run("open a sent message", chromedp.Click(css(`header nav a[href="/admin/messages"]`)),
			chromedp.WaitVisible(css(fmt.Sprintf(`tr[data-message=%q]`, sent[0]))),
			chromedp.Click(css(fmt.Sprintf(`tr[data-message=%q] .subject a`, sent[0]))),
			chromedp.WaitVisible(css(`section.recipient`)))
		if p, st, rcpt := eval(`location.pathname`), eval(`document.querySelector("#status").textContent`),
			eval(`[...document.querySelectorAll("section.recipient")].map(s => s.dataset.recipient + " " + s.querySelector(".state").textContent).join("|")`); p != "/admin/messages/"+sent[0] || st != "sent" || rcpt != "ann@example.com sent" {
			t.Errorf("message page at %s: status %q, recipients %q; want status sent, \"ann@example.com sent\"", p, st, rcpt)
		}
		if cur := eval(`document.querySelector('header nav a[aria-current="page"]').getAttribute("href")`); cur != "/admin/messages" {
			t.Errorf("a message's page marks %s current, want /admin/messages", cur)
		}
		pageCSP("message")
		run("back to the overview from the nav", chromedp.Click(css(`header nav a[href="/admin"]`)), chromedp.WaitVisible(css("#global")))
		current("/admin")

		run("log out", chromedp.Click(css("form.logout button")), chromedp.WaitVisible(css("#api_key")))
		if p := eval(`location.pathname`); p != "/admin/login" {
			t.Errorf("after logout: at %s, want /admin/login", p)
		}
		run("open /admin again", chromedp.Navigate(s.URL+"/admin"), chromedp.WaitVisible(css("#api_key")))
		if p := eval(`location.pathname`); p != "/admin/login" {
			t.Errorf("/admin after logout is at %s, want /admin/login", p)
		}
		pageCSP("after logout")

		// The control: an inline style element must be refused and seen,
		// both as the page's event and on the console.
		events, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`new Promise(resolve => {
			document.addEventListener("securitypolicyviolation", () => resolve(window.__csp), {once: true});
			const style = document.createElement("style");
			style.textContent = "body { color: red }";
			document.head.appendChild(style);
		})`, chromedp.EvalAwaitPromise))
		if err != nil || len(events) != 1 || !strings.HasPrefix(events[0], "style-src") {
			t.Fatalf("the deliberate violation was seen as %q (%v), want one style-src", events, err)
		}
		lines := console.waitCSP(ctx, 1)
		var unexpected []string
		for i, l := range lines {
			if !(isCSPLine(l) && strings.Contains(l, "style") && i == len(lines)-1) {
				unexpected = append(unexpected, l)
			}
		}
		if len(unexpected) > 0 || len(lines) == 0 {
			t.Errorf("console: %q, want only the deliberate violation", lines)
		}
		if len(violations) > 0 {
			t.Errorf("CSP violations:\n%s", strings.Join(violations, "\n"))
		}
		t.Logf("the browser test on %s took %s", driver, time.Since(started).Round(time.Millisecond))
	})
}
