package app

import (
	"context"
	"crypto/x509"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nornweave/nornweave/core/config"
)

// reach makes a TLS handshake with the API base and sends no request.
func TestReachHandshakesAndSendsNothing(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { requests.Add(1) }))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake below
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	how, err := reach(context.Background(), srv.URL+"/v3", roots, noProxy)
	if err != nil {
		t.Fatal(err)
	}
	want := "DNS 1 address, TCP " + srv.Listener.Addr().String() + ", TLS 1.3"
	if how != want {
		t.Errorf("reach = %q, want %q", how, want)
	}
	if _, err := reach(context.Background(), srv.URL, nil, noProxy); err == nil || !strings.HasPrefix(err.Error(), "TLS: ") {
		t.Errorf("reach with the system roots = %v, want a TLS error", err)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("reach made %d HTTP requests, want none", n)
	}
}

func noProxy(*http.Request) (*url.URL, error) { return nil, nil }

// Behind HTTPS_PROXY, which the providers honour, the proxy is what is reached.
func TestReachGoesThroughTheProxy(t *testing.T) {
	t.Parallel()
	proxy := httptest.NewServer(http.NotFoundHandler())
	defer proxy.Close()
	pu, err := url.Parse(proxy.URL)
	if err != nil {
		t.Fatal(err)
	}
	how, err := reach(context.Background(), "https://api.mailgun.net", nil, http.ProxyURL(pu))
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(proxy.URL, "http://")
	if want := "via proxy " + host + ": DNS 1 address, TCP " + host + ", TLS to the API not checked through the proxy"; how != want {
		t.Errorf("reach = %q, want %q", how, want)
	}
}

func TestAPIBase(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		provider, override, want string
	}{
		{"mailgun", "", "https://api.mailgun.net"},
		{"mailgun", "https://api.eu.mailgun.net", "https://api.eu.mailgun.net"},
		{"sendgrid", "", "https://api.sendgrid.com"},
		{"resend", "", "https://api.resend.com"},
		{"ses", "", "https://email.eu-west-1.amazonaws.com"},
		{"ses", "http://localhost:4566", "http://localhost:4566"},
	} {
		cfg := testConfig(tt.provider, tt.override)
		if got := APIBase(cfg); got != tt.want {
			t.Errorf("APIBase(%s, %q) = %q, want %q", tt.provider, tt.override, got, tt.want)
		}
	}
}

func testConfig(provider, override string) config.Config {
	c := config.Config{EmailProvider: provider, AWSRegion: "eu-west-1"}
	c.MailgunAPIBase, c.SendgridAPIBase, c.ResendAPIBase, c.SESEndpoint = override, override, override, override
	return c
}

// The delivery-events check says which webhooks are configured, warns when
// the provider in use reports nothing back, and fails on a secret that
// does not parse.
func TestCheckDeliveryEvents(t *testing.T) {
	t.Parallel()
	base := config.Config{EmailProvider: "sendgrid", SendgridAPIKey: "k", MailgunWebhookSigningKey: "key-1"}
	r := checkDeliveryEvents(base)
	if r.Status != CheckWarn || !strings.Contains(r.Detail, "mailgun configured at POST /webhooks/mailgun") ||
		!strings.Contains(r.Detail, "sendgrid not configured") || !strings.Contains(r.Err.Error(), "SENDGRID_WEBHOOK_PUBLIC_KEY") {
		t.Errorf("sendgrid without its webhook = %v %q %v", r.Status, r.Detail, r.Err)
	}
	bad := base
	bad.SendgridWebhookPublicKey = "not a key"
	if r := checkDeliveryEvents(bad); r.Status != CheckFail {
		t.Errorf("an unparsable public key = %v %q", r.Status, r.Detail)
	}
	smtp := config.Config{EmailProvider: "smtp", BounceAddress: "bounces@acme.test",
		BounceIMAPURL: "imaps://bounces:s3cret@imap.acme.test/INBOX"}
	if r := checkDeliveryEvents(smtp); r.Status != CheckOK || strings.Contains(r.Detail, "s3cret") ||
		!strings.Contains(r.Detail, "smtp bounces read from imaps://xxxxx@imap.acme.test/INBOX") {
		t.Errorf("smtp with a bounce mailbox = %v %q", r.Status, r.Detail)
	}
	smtp.BounceIMAPURL = ""
	if r := checkDeliveryEvents(smtp); r.Status != CheckWarn {
		t.Errorf("smtp without a bounce mailbox = %v %q", r.Status, r.Detail)
	}
}
