package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// A direct send that was still waiting for the one SMTP connection when
// its server was killed never reached the relay: after a restart it is
// failed as "not sent" (safe to send again) and does not count against
// the throttle, while the send that was on the wire is "delivery
// unknown" and counts (issue 26).
func TestWaitingSendNotSentAfterKill(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		mx := smtptest.Start(t)
		env := procEnv(t, driver, mx, "SMTP_MAX_CONNECTIONS=1", "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE=10")
		p := startProc(t, env)
		inbox := p.createInbox(t, "support")

		post := func(subject string) {
			body, _ := json.Marshal(map[string]any{"inbox_id": inbox, "to": []string{"bob@customer.test"},
				"subject": subject, "body": "Hi"})
			go func() { // answered by no one: the server is killed first
				res, err := http.Post(p.URL+"/v1/messages", "application/json", bytes.NewReader(body))
				if err == nil {
					res.Body.Close()
				}
			}()
		}
		mx.DelayDataReply(time.Hour) // taken, never answered
		post("on the wire")
		waitFor(t, 20*time.Second, func() bool { return mx.Count() == 1 })
		post("waiting")
		var dsn string
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "DATABASE_URL="); ok {
				dsn = v
			}
		}
		db := openBeside(t, driver, dsn)
		waitFor(t, 20*time.Second, func() bool {
			var n int
			err := db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM send_log WHERE waiting`).Scan(&n)
			return err == nil && n == 1
		})
		p.kill(t)
		mx.DelayDataReply(0)

		p = startProc(t, env)
		got := map[string]string{}
		for _, it := range p.do(t, "GET", "/v1/messages?inbox_id="+inbox, nil).JSON(t)["items"].([]any) {
			m := it.(map[string]any)
			e, _ := m["error"].(string)
			got[m["subject"].(string)] = m["status"].(string) + ": " + e
		}
		if w := got["waiting"]; !strings.HasPrefix(w, "failed: not sent:") || !strings.Contains(w, "safe to send again") {
			t.Errorf("the waiting send: got %q, want failed, not sent, safe to send again", w)
		}
		if w := got["on the wire"]; !strings.HasPrefix(w, "failed: ") || !strings.Contains(w, "delivery unknown") {
			t.Errorf("the send on the wire: got %q, want failed, delivery unknown", w)
		}
		if used := p.rateLimitWindow(t, "per_minute")["used"]; used != 1.0 {
			t.Errorf("the minute window counts %v sends, want 1 (the one on the wire)", used)
		}
		if n := mx.Count(); n != 1 {
			t.Errorf("the relay received %d messages, want 1", n)
		}
	})
}
