package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
	// Not parallel: it reads real-minute windows in the browser, within the minute of its sends (run parallel beside a second make test: 2 min 7 s).
	forEachDriver(t, func(t *testing.T, driver string) {
		started := time.Now()
		const key = "admin-page-key"
		s := startDefault(t, driver, func(c *config.Config) {
			c.APIKey = key
			c.SendRateLimitPerMinute, c.SendRateLimitPerHour = 10, 100
			c.InboxSendRateLimitPerMinute = 2
			c.OutboundDomainBlocklist = `^blocked\.example$`
			c.AuthFailureLimit = 3 // the wrong key below, and two more at the end
			webhookConfig(c)       // http and loopback targets, for the Webhooks page's endpoint
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
		// A send the relay refuses, from another inbox (failed), and one
		// admitted by an inbox allowed one an hour, then one queued by
		// its refusal: it stays queued for the test (Retry-After about an
		// hour), with the refusal recorded.
		other := s.createInbox(t, "other", auth...)
		s.SMTP.RejectDataTimes(1, 550, [3]int{5, 7, 1}, "rejected by policy")
		r := s.do(t, "POST", "/v1/messages", map[string]any{"inbox_id": other, "to": []string{"cy@example.com"},
			"subject": "Refused", "body": "Hi"}, auth...)
		if r.Status != 201 || r.JSON(t)["status"] != "failed" {
			t.Fatalf("send the relay refuses = %d: %s, want 201 failed", r.Status, r.Body)
		}
		hourly := s.createInbox(t, "hourly", auth...)
		if r := s.do(t, "PATCH", "/v1/inboxes/"+hourly, map[string]any{"rate_limit": map[string]any{"per_hour": 1}}, auth...); r.Status != 200 {
			t.Fatalf("inbox per_hour 1 = %d: %s", r.Status, r.Body)
		}
		var made []string // "id subject status", oldest first
		for _, id := range sent {
			made = append(made, id+" Hello sent")
		}
		made = append(made, r.JSON(t)["id"].(string)+" Refused failed")
		var queued string
		for i, want := range []int{201, 202} {
			r := s.do(t, "POST", "/v1/messages", map[string]any{"inbox_id": hourly, "to": []string{"dee@example.com"},
				"subject": fmt.Sprintf("Hourly %d", i), "body": "Hi", "on_throttle": "queue"}, auth...)
			if r.Status != want {
				t.Fatalf("hourly send %d = %d, want %d: %s", i+1, r.Status, want, r.Body)
			}
			id, status := r.JSON(t)["id"].(string), map[int]string{201: "sent", 202: "queued"}[want]
			made = append(made, fmt.Sprintf("%s Hourly %d %s", id, i, status))
			queued = id
		}
		// Refusals of every other reason: a blocked domain, a request
		// without a recipient; the suppressed one comes below, once an
		// address is on the list.
		for _, tt := range []struct {
			body map[string]any
			want int
		}{
			{map[string]any{"inbox_id": other, "to": []string{"x@blocked.example"}, "subject": "S", "body": "B"}, 403},
			{map[string]any{"inbox_id": other, "subject": "S", "body": "B"}, 422},
		} {
			if r := s.do(t, "POST", "/v1/messages", tt.body, auth...); r.Status != tt.want {
				t.Fatalf("refused send = %d, want %d: %s", r.Status, tt.want, r.Body)
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
		// With NORNWEAVE_SCREENSHOTS set to a folder (make screenshots),
		// the SQLite run saves each page as docs shows it.
		shots := os.Getenv("NORNWEAVE_SCREENSHOTS")
		if shots != "" && driver == "sqlite" {
			run("size the window", chromedp.EmulateViewport(1280, 900))
		}
		shot := func(name string) {
			t.Helper()
			if shots == "" || driver != "sqlite" {
				return
			}
			png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
			if err == nil {
				err = os.WriteFile(filepath.Join(shots, "admin-"+name+".png"), png, 0o644)
			}
			if err != nil {
				t.Fatalf("screenshot %s: %v", name, err)
			}
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
		shot("login")
		run("log in with the key", chromedp.SendKeys(css("#api_key"), key),
			chromedp.Click(css("button[type=submit]")), chromedp.WaitVisible(css("#global")))
		if p := eval(`location.pathname`); p != "/admin" {
			t.Errorf("after the key: at %s, want /admin", p)
		}
		pageCSP("overview")
		// The windows refresh by themselves (htmx, every 2 s): their
		// time moves on without a reload, and the page is still the one
		// loaded (a mark set on it stays).
		first := eval(`document.body.dataset.loaded = "1"; document.querySelector("#windows-at").getAttribute("datetime")`)
		run("the windows refresh", chromedp.WaitVisible(css(fmt.Sprintf(`body[data-loaded] #windows-at:not([datetime=%q])`, first))))
		pageCSP("overview refreshed")

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
		// Three sent: two by the inbox, one by the hourly inbox; the
		// relay's refusal gave its slot back.
		if global["per_minute"] != "3/10" || global["per_hour"] != "3/100" || inboxWindows["per_minute"] != "2/2" {
			t.Errorf("global %v, inbox %v; want per_minute 3/10, per_hour 3/100 and the inbox's per_minute 2/2",
				global, inboxWindows)
		}

		// The list pages, reached through the nav: a message scheduled an
		// hour ahead on Held with its time, a manual suppression, and a
		// webhook endpoint without its secret.
		at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
		r = s.do(t, "POST", "/v1/messages", map[string]any{"inbox_id": inbox, "to": []string{"bea@example.com"},
			"subject": hostileSubject, "body": "Hi", "scheduled_at": at.Format(time.RFC3339)}, auth...)
		if r.Status != 201 && r.Status != 202 {
			t.Fatalf("scheduled send = %d: %s", r.Status, r.Body)
		}
		scheduled := r.JSON(t)["id"].(string)
		made = append(made, scheduled+" "+hostileSubject+" scheduled")
		if r := s.do(t, "POST", "/v1/suppressions", map[string]any{"email": "gone@example.com", "reason": "manual"}, auth...); r.Status != 201 {
			t.Fatalf("suppression = %d: %s", r.Status, r.Body)
		}
		if r := s.do(t, "POST", "/v1/messages", map[string]any{"inbox_id": other, "to": []string{"gone@example.com"},
			"subject": "S", "body": "B"}, auth...); r.Status != 422 {
			t.Fatalf("send to a suppressed address = %d, want 422: %s", r.Status, r.Body)
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
			eval(row+`.querySelector(".scheduled time").getAttribute("datetime")`); st != "scheduled" || subj != hostileSubject || when != at.Format(time.RFC3339) {
			t.Errorf("Held row: %q %q at %q, want scheduled %q at %s", st, subj, when, hostileSubject, at.Format(time.RFC3339))
		}
		pageCSP("held")
		shot("held")
		run("open Suppressions from the nav", chromedp.Click(css(`header nav a[href="/admin/suppressions"]`)),
			chromedp.WaitVisible(css("tr.suppression")))
		current("/admin/suppressions")
		if got := eval(`[...document.querySelectorAll("tr.suppression")].map(r => r.querySelector(".email").textContent + " " + r.querySelector(".reason").textContent).join("|")`); got != "gone@example.com manual" {
			t.Errorf("Suppressions rows %q, want \"gone@example.com manual\"", got)
		}
		pageCSP("suppressions")
		shot("suppressions")
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
		shot("webhooks")

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
		if got, want := listed(), strings.Join(reversed(made), "|"); got != want {
			t.Errorf("Messages rows %q, want %q", got, want)
		}
		if to := eval(fmt.Sprintf(`document.querySelector('tr[data-message=%q] .to').textContent`, sent[0])); to != "ann@example.com" {
			t.Errorf("Messages row's To %q, want ann@example.com", to)
		}
		pageCSP("messages")
		shot("messages")
		eval(`document.querySelector("#status").value = "scheduled"; ""`)
		run("filter Messages by status", chromedp.Click(css("form.filter button")),
			chromedp.WaitNotPresent(css(fmt.Sprintf(`tr[data-message=%q]`, sent[0]))),
			chromedp.WaitVisible(css(fmt.Sprintf(`tr[data-message=%q]`, scheduled))))
		if got, want := listed(), scheduled+" "+hostileSubject+" scheduled"; got != want {
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
		// The queued message's page: the refusal that queued it, with
		// the full window and the Retry-After it was given.
		run("open the queued message", chromedp.Navigate(s.URL+"/admin/messages/"+queued), chromedp.WaitVisible(css("#throttle-refusal")))
		if full, retry := eval(`document.querySelector("#refusal-full").textContent`),
			eval(`document.querySelector("#refusal-retry-after").textContent`); full != "inbox-per-hour" || retry < "3000" || len(retry) != 4 {
			t.Errorf("the queued message's refusal: full %q, Retry-After %q s; want inbox-per-hour, about 3600 s", full, retry)
		}
		if ratio := eval(`document.querySelector('#throttle-refusal tr[data-window="inbox-per-hour"] .ratio').textContent`); ratio != "1/1" {
			t.Errorf("the refusal's inbox-per-hour window %q, want 1/1", ratio)
		}
		pageCSP("queued message")
		shot("message-queued")
		// A sent message's page: the windows when its slot was settled,
		// its cost, one attempt.
		run("open the first send", chromedp.Navigate(s.URL+"/admin/messages/"+sent[0]), chromedp.WaitVisible(css("#throttle-admission")))
		decision := eval(`[...document.querySelectorAll("#throttle-admission tr.window")].map(r => r.dataset.window + " " +
			r.querySelector(".ratio").textContent).join("|")`)
		if !strings.Contains(decision, "per-minute 1/10") || !strings.Contains(decision, "inbox-per-minute 1/2") ||
			eval(`document.querySelector("#admission-cost").textContent`) != "1" || eval(`document.querySelector("#attempts").textContent`) != "1" ||
			eval(`String(document.querySelector("#throttle-refusal"))`) != "null" {
			t.Errorf("the first send's decision: %q, cost %q, attempts %q; want per-minute 1/10, inbox-per-minute 1/2, cost 1, 1 attempt, no refusal",
				decision, eval(`document.querySelector("#admission-cost").textContent`), eval(`document.querySelector("#attempts").textContent`))
		}
		pageCSP("sent message")
		shot("message")

		// The overview's charts and refusals: what the sends above made,
		// once the server has added its counts (about every second).
		var counts map[string]string
		for deadline := time.Now().Add(30 * time.Second); ; {
			run("the overview", chromedp.Navigate(s.URL+"/admin"), chromedp.WaitVisible(css("#activity")))
			if err := json.Unmarshal([]byte(eval(`JSON.stringify(Object.fromEntries([
				...["minutes-sent", "minutes-failed", "hours-sent", "hours-failed", "reputation-sent"].map(id => [id, document.getElementById(id).textContent]),
				...[...document.querySelectorAll("#refusals tr[data-reason]")].map(r => [r.dataset.reason, r.querySelector(".count").textContent]),
				["minute-bars", [...document.querySelectorAll("#minutes g.bucket")].reduce((n, g) => n + +g.dataset.sent, 0) + "/" +
					[...document.querySelectorAll("#minutes g.bucket")].reduce((n, g) => n + +g.dataset.failed, 0)],
				["hour-bars", [...document.querySelectorAll("#hours g.bucket")].reduce((n, g) => n + +g.dataset.sent, 0) + "/" +
					[...document.querySelectorAll("#hours g.bucket")].reduce((n, g) => n + +g.dataset.failed, 0)],
				["bars", document.querySelectorAll("#minutes g.bucket").length + "/" + document.querySelectorAll("#hours g.bucket").length]]))`)), &counts); err != nil {
				t.Fatal(err)
			}
			if counts["minutes-sent"] == "3" && counts["suppressed"] == "1" || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		wantCounts := map[string]string{"minutes-sent": "3", "minutes-failed": "1", "hours-sent": "3", "hours-failed": "1",
			"reputation-sent": "3", "throttled": "1", "domain_blocked": "1", "suppressed": "1", "validation": "1",
			"minute-bars": "3/1", "hour-bars": "3/1", "bars": "60/168"}
		if fmt.Sprint(counts) != fmt.Sprint(wantCounts) {
			t.Errorf("the overview's counts %v, want %v", counts, wantCounts)
		}
		pageCSP("overview with counts")
		shot("overview")
		run("back to the overview from the nav", chromedp.Click(css(`header nav a[href="/admin/messages"]`)), chromedp.WaitVisible(css("tr.message")),
			chromedp.Click(css(`header nav a[href="/admin"]`)), chromedp.WaitVisible(css("#global")))
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
		// The lockout: with the wrong key of the start, two more make
		// AUTH_FAILURE_LIMIT's three; then even the right key is refused.
		for i, k := range []string{"wrong-1", "wrong-2", key} {
			// The page before the answer is marked: its error is not the
			// answer's.
			eval(`document.body.dataset.stale = "1"; ""`)
			run("log in, locked out at the last", chromedp.SendKeys(css("#api_key"), k),
				chromedp.Click(css("button[type=submit]")), chromedp.WaitVisible(css("body:not([data-stale]) #login-error")))
			msg := eval(`document.querySelector("#login-error").textContent`)
			if want := map[bool]string{false: "Wrong key.", true: "Too many failed attempts from this address; try again later."}[i == 2]; msg != want {
				t.Errorf("login %d after logout says %q, want %q", i+1, msg, want)
			}
		}
		if r := s.do(t, "GET", "/v1/rate-limit", nil, auth...); r.Status != 429 {
			t.Errorf("the API with the right key during the lockout = %d, want 429", r.Status)
		}
		pageCSP("locked out")

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
			lockedOut := strings.Contains(l, "status of 429") && strings.HasSuffix(l, "/admin/login)")
			if !lockedOut && !(isCSPLine(l) && strings.Contains(l, "style") && i == len(lines)-1) {
				unexpected = append(unexpected, l)
			}
		}
		if len(unexpected) > 0 || len(lines) == 0 {
			t.Errorf("console: %q, want only the lockout's 429 and the deliberate violation", lines)
		}
		if len(violations) > 0 {
			t.Errorf("CSP violations:\n%s", strings.Join(violations, "\n"))
		}
		t.Logf("the browser test on %s took %s", driver, time.Since(started).Round(time.Millisecond))
	})
}

// hostileSubject is markup that the pages must show as text: a script
// that ran, or an element made of it, would leave the text different (and
// a console line or a CSP violation). A bidi override never gets this far:
// the API refuses it in a subject (422); the handler tests render one.
const hostileSubject = `Later <script>alert(1)</script>"><svg onload=alert(2)>`

// reversed is a copy of l, last first.
func reversed(l []string) []string {
	out := make([]string, len(l))
	for i, s := range l {
		out[len(l)-1-i] = s
	}
	return out
}
