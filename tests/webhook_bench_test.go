package tests

import (
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nornweave/nornweave/api"
	"github.com/nornweave/nornweave/internal/testkit/apptest"
	"github.com/nornweave/nornweave/internal/testkit/providertest"
	"github.com/nornweave/nornweave/internal/testkit/webhooktest"
)

// BenchmarkWebhookCostPerByte is issue 29's second must-show: the cost per
// byte of a SendGrid event array of just under api.WebhookMaxBody (1 MiB,
// about 3,000 events), signed, posted to POST /webhooks/sendgrid, against
// a plain send's (POST /v1/messages with a small body; its bytes are the
// request body's), one request at a time each, on the same server: the
// app in-process sending through a fake of SendGrid's API, which answered
// the 300 sends made first. Four events of five name one of those
// messages, the fifth one we do not know; every event of every iteration
// has an sg_event_id of its own and the signature is made just before the
// post, so that each iteration stores the same number of new events (and
// suppressions: its hard bounces and complaints are to addresses of their
// own). A send of a 900 KiB body is measured too, the baseline of issue
// 17's costs per byte: a small send's bytes are few, and its cost per
// byte is mostly the cost of a request. Each reports ns/byte; they
// alternate in NORNWEAVE_BENCH_ROUNDS rounds (see alternate), the last
// of each round reporting x-send and x-send-900KiB: the round's webhook
// ns/byte over each send's.
//
//	NORNWEAVE_BENCH_ROUNDS=3 go test -run '^$' -bench BenchmarkWebhookCostPerByte -benchtime 5s ./tests/
func BenchmarkWebhookCostPerByte(b *testing.B) {
	for _, driver := range []string{"sqlite", "postgres"} {
		b.Run(driver, func(b *testing.B) {
			h := startHookBench(b, driver, 300)
			names := []string{"send", "send-900KiB", "sendgrid-1MiB"}
			alternate(b, names, func(b *testing.B, i int) float64 {
				switch i {
				case 0:
					return h.benchSend(b, h.send)
				case 1:
					return h.benchSend(b, h.bigSend)
				}
				return h.benchHook(b)
			}, func(b *testing.B, perByte []float64) {
				b.ReportMetric(perByte[2]/perByte[0], "x-send")
				b.ReportMetric(perByte[2]/perByte[1], "x-send-900KiB")
			})
		})
	}
}

// hookBench is a server that sent through the SendGrid fake and takes
// SendGrid's signed webhook.
type hookBench struct {
	s       *server
	c       benchHTTPClient
	key     *ecdsa.PrivateKey
	send    []byte   // a small send's body
	bigSend []byte   // a send's body with 900 KiB of text
	pids    []string // provider ids of the messages sent
	events  int      // per webhook body, found by the first
	round   int
}

// startHookBench starts the server on driver and sends n messages through
// the SendGrid fake, 8 at a time.
func startHookBench(b *testing.B, driver string, n int) *hookBench {
	f := providertest.Start(b, "sendgrid")
	cfg := apptest.Config(b, driver)
	cfg.EmailProvider, cfg.SendgridAPIKey, cfg.SendgridAPIBase = "sendgrid", "sg-key", f.URL
	key, public := webhooktest.SendGridKey(b)
	cfg.SendgridWebhookPublicKey = public
	h := &hookBench{s: &server{Server: apptest.Start(b, cfg), cfg: cfg}, c: benchClient(b), key: key}
	inbox := h.s.createInbox(b, "bench")
	h.send = smallSendJSON(b, inbox, "ann@customer.test")
	var err error
	h.bigSend, err = json.Marshal(map[string]any{"inbox_id": inbox, "to": []string{"ann@customer.test"},
		"subject": "Benchmark", "body": strings.Repeat("Hello Ann, this is a long benchmark message.\n", 900<<10/45)})
	if err != nil {
		b.Fatal(err)
	}
	h.pids = make([]string, n)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				status, out, err := h.c.post(h.s.URL+"/v1/messages", h.send, nil)
				var m struct {
					ProviderMessageID string `json:"provider_message_id"`
				}
				if err == nil && status == http.StatusCreated {
					err = json.Unmarshal(out, &m)
				}
				if err != nil || status != http.StatusCreated || m.ProviderMessageID == "" {
					mu.Lock()
					first = fmt.Errorf("send %d: %d %.300s %v", i, status, out, err)
					mu.Unlock()
					return
				}
				h.pids[i] = m.ProviderMessageID
			}
		})
	}
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
	return h
}

// benchSend posts send to /v1/messages once per iteration and returns its
// ns/byte.
func (h *hookBench) benchSend(b *testing.B, send []byte) float64 {
	b.SetBytes(int64(len(send)))
	b.ReportAllocs()
	for b.Loop() {
		if status, out, err := h.c.post(h.s.URL+"/v1/messages", send, nil); err != nil || status != http.StatusCreated {
			b.Fatalf("send: %d %.300s %v", status, out, err)
		}
	}
	return h.reportPerByte(b, len(send))
}

// benchHook posts a new signed event array once per iteration, each
// answered 200 with every event stored or ignored, and returns its
// ns/byte.
func (h *hookBench) benchHook(b *testing.B) float64 {
	body, known := h.events1MiB()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		body, _ = h.events1MiB()
		hdr := webhooktest.SendGridHeaders(b, h.key, time.Now(), body)
		b.StartTimer()
		status, out, err := h.c.post(h.s.URL+"/webhooks/sendgrid", body, hdr)
		if err != nil || status != http.StatusOK {
			b.Fatalf("webhook: %d %.300s %v", status, out, err)
		}
		var got struct{ Stored, Seen, Ignored int }
		if err := json.Unmarshal(out, &got); err != nil || got.Stored != known || got.Ignored != h.events-known {
			b.Fatalf("webhook answered %s, want %d stored and %d ignored", out, known, h.events-known)
		}
	}
	b.ReportMetric(float64(h.events), "events/op")
	return h.reportPerByte(b, len(body))
}

// reportPerByte reports and returns the wall time of an iteration per
// byte of its request.
func (h *hookBench) reportPerByte(b *testing.B, size int) float64 {
	ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / float64(size)
	b.ReportMetric(ns, "ns/byte")
	return ns
}

// events1MiB is the next round's SendGrid event array, as many events as
// fit under api.WebhookMaxBody, each of SendGrid's documented shape, and
// how many of them name a message we sent. Every round's body has the same
// events but for the round's number in every sg_event_id and recipient,
// and so the same length.
func (h *hookBench) events1MiB() ([]byte, int) {
	h.round++
	at := time.Now().Unix()
	var (
		out   strings.Builder
		known int
	)
	out.WriteString("[")
	for k := 0; ; k++ {
		if h.events > 0 && k == h.events {
			break
		}
		ev := sendGridEvent(h.round, k, at, h.pid(k))
		if h.events == 0 && out.Len()+1+len(ev)+3 > api.WebhookMaxBody {
			h.events = k
			break
		}
		if k > 0 {
			out.WriteString(",")
		}
		out.WriteString(ev)
		if k%5 != 4 {
			known++
		}
	}
	out.WriteString("]\r\n")
	return []byte(out.String()), known
}

// pid is the sg_message_id prefix of event k: one of ours, but every fifth
// event one of 97 messages we never sent.
func (h *hookBench) pid(k int) string {
	if k%5 == 4 {
		return fmt.Sprintf("unknown%02dXj4kT9mPq", k%97)
	}
	return h.pids[k%len(h.pids)]
}

// sendGridEvent is event k of round as SendGrid's Event Webhook documents
// it: mostly deliveries, opens and clicks; some deferrals, drops, soft
// (blocked) and hard bounces; a complaint now and then.
func sendGridEvent(round, k int, at int64, pid string) string {
	common := fmt.Sprintf(`"email":"r%06d-%05d@customer.test","timestamp":%d,"smtp-id":"<%s@ismtpd0001p1lon1.sendgrid.net>",`+
		`"sg_event_id":"ZmFrZS0%06d-%05d","sg_message_id":"%s.filter0001.16648.5515E0B88.0","category":["receipts"]`,
		round, k, at, pid, round, k, pid)
	switch k % 20 {
	case 0, 1, 2, 3, 4, 5, 6, 7, 8, 9:
		return `{` + common + `,"event":"delivered","response":"250 2.0.0 OK 1700000000 x1si123456qkb.12 - gsmtp"}`
	case 10, 11, 12, 13:
		return `{` + common + `,"event":"open","sg_machine_open":false,"useragent":"Mozilla/5.0 (Windows NT 10.0; Win64; x64)","ip":"203.0.113.7"}`
	case 14, 15:
		return `{` + common + `,"event":"click","url":"https://acme.test/orders/1234?utm_source=email","useragent":"Mozilla/5.0","ip":"203.0.113.7"}`
	case 16:
		return `{` + common + `,"event":"deferred","response":"421 4.7.0 Try again later","attempt":"2"}`
	case 17:
		return `{` + common + `,"event":"bounce","type":"bounce","status":"5.1.1","bounce_classification":"Invalid Address",` +
			`"reason":"550 5.1.1 The email account that you tried to reach does not exist"}`
	case 18:
		return `{` + common + `,"event":"dropped","reason":"Bounced Address","status":"5.0.0"}`
	default:
		if k%40 == 19 {
			return `{` + common + `,"event":"spamreport"}`
		}
		return `{` + common + `,"event":"bounce","type":"blocked","status":"4.0.0","bounce_classification":"Reputation",` +
			`"reason":"421 4.7.0 Our system has detected an unusual rate of unsolicited mail"}`
	}
}
