package smtptest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// The client side of these tests is emersion/go-smtp's client, independent
// of the go-mail code the server exists to test.

const rawMultipart = "From: a@example.com\r\n" +
	"To: b@example.com\r\n" +
	"Subject: =?UTF-8?q?Gr=C3=BC=C3=9Fe?=\r\n" +
	"MIME-Version: 1.0\r\n" +
	"Content-Type: multipart/mixed; boundary=OUT\r\n" +
	"\r\n" +
	"--OUT\r\n" +
	"Content-Type: multipart/alternative; boundary=ALT\r\n" +
	"\r\n" +
	"--ALT\r\n" +
	"Content-Type: text/plain; charset=UTF-8\r\n" +
	"Content-Transfer-Encoding: quoted-printable\r\n" +
	"\r\n" +
	"Gr=C3=BC=C3=9Fe\r\n" +
	"line two\r\n" +
	"--ALT\r\n" +
	"Content-Type: text/html; charset=UTF-8\r\n" +
	"Content-Transfer-Encoding: base64\r\n" +
	"\r\n" +
	"PHA+aGk8L3A+\r\n" +
	"--ALT--\r\n" +
	"--OUT\r\n" +
	"Content-Type: image/png; name=\"logo.png\"\r\n" +
	"Content-Disposition: inline; filename=\"logo.png\"\r\n" +
	"Content-ID: <logo>\r\n" +
	"Content-Transfer-Encoding: base64\r\n" +
	"\r\n" +
	"AQID\r\n" +
	"--OUT\r\n" +
	"Content-Type: text/plain; name=\"notes.txt\"\r\n" +
	"Content-Disposition: attachment; filename=\"=?UTF-8?q?n=C3=B6tes.txt?=\"\r\n" +
	"\r\n" +
	"attached text\r\n" +
	"--OUT--\r\n"

func send(t *testing.T, c *smtp.Client, from string, to []string, data string) error {
	t.Helper()
	return c.SendMail(from, to, strings.NewReader(data))
}

func dial(t *testing.T, s *Server) *smtp.Client {
	t.Helper()
	c, err := smtp.Dial(s.Addr())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestMessageParsing(t *testing.T) {
	s := Start(t)
	c := dial(t, s)
	if err := send(t, c, "a@example.com", []string{"b@example.com", "hidden@example.com"}, rawMultipart); err != nil {
		t.Fatalf("send: %v", err)
	}
	msgs := s.Messages()
	if len(msgs) != 1 {
		t.Fatalf("got %d messages, want 1", len(msgs))
	}
	m := msgs[0]
	if m.ParseErr != nil {
		t.Fatalf("ParseErr: %v", m.ParseErr)
	}
	if m.From != "a@example.com" || strings.Join(m.To, ",") != "b@example.com,hidden@example.com" {
		t.Errorf("got envelope %q → %q, want a@example.com → [b@example.com hidden@example.com]", m.From, m.To)
	}
	if got := m.Header.Get("Subject"); got != "=?UTF-8?q?Gr=C3=BC=C3=9Fe?=" {
		t.Errorf("got Subject %q, want the raw encoded word", got)
	}
	if m.Text != "Grüße\nline two" {
		t.Errorf("got Text %q, want %q", m.Text, "Grüße\nline two")
	}
	if m.HTML != "<p>hi</p>" {
		t.Errorf("got HTML %q, want %q", m.HTML, "<p>hi</p>")
	}
	want := []Part{
		{Filename: "logo.png", ContentType: "image/png", ContentID: "logo", Disposition: "inline", Content: []byte{1, 2, 3}},
		{Filename: "nötes.txt", ContentType: "text/plain", Disposition: "attachment", Content: []byte("attached text")},
	}
	if len(m.Attachments) != len(want) {
		t.Fatalf("got %d attachments, want %d", len(m.Attachments), len(want))
	}
	for i, w := range want {
		g := m.Attachments[i]
		if g.Filename != w.Filename || g.ContentType != w.ContentType || g.ContentID != w.ContentID ||
			g.Disposition != w.Disposition || string(g.Content) != string(w.Content) {
			t.Errorf("attachment %d: got %+v, want %+v", i, g, w)
		}
	}
	if m.TLS {
		t.Errorf("got TLS true on a plain connection")
	}
	if !strings.Contains(string(m.Data), "Content-ID: <logo>") {
		t.Errorf("Data does not hold the raw message")
	}
}

func TestMessagesReturnsCopies(t *testing.T) {
	s := Start(t)
	if err := send(t, dial(t, s), "a@example.com", []string{"b@example.com"}, rawMultipart); err != nil {
		t.Fatalf("send: %v", err)
	}
	first := s.Messages()
	first[0].To[0] = "changed"
	first[0].Attachments[0].Content[0] = 99
	first[0].Header["Subject"][0] = "changed"
	again := s.Messages()[0]
	if again.To[0] != "b@example.com" || again.Attachments[0].Content[0] != 1 || again.Header.Get("Subject") == "changed" {
		t.Errorf("mutating the result of Messages changed the server's copy")
	}
}

func TestTLSModes(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
		dial func(s *Server) (*smtp.Client, error)
	}{
		{"starttls", []Option{WithSTARTTLS()}, func(s *Server) (*smtp.Client, error) {
			return smtp.DialStartTLS(s.Addr(), s.ClientTLSConfig())
		}},
		{"implicit", []Option{WithImplicitTLS()}, func(s *Server) (*smtp.Client, error) {
			return smtp.DialTLS(s.Addr(), s.ClientTLSConfig())
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Start(t, tt.opts...)
			c, err := tt.dial(s)
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			defer c.Close()
			if _, ok := c.TLSConnectionState(); !ok {
				t.Fatalf("got a plain connection, want TLS")
			}
			if err := send(t, c, "a@example.com", []string{"b@example.com"}, rawMultipart); err != nil {
				t.Fatalf("send: %v", err)
			}
			if msgs := s.Messages(); len(msgs) != 1 || !msgs[0].TLS {
				t.Errorf("got %d messages (TLS %v), want 1 over TLS", len(msgs), len(msgs) == 1 && msgs[0].TLS)
			}
		})
	}
}

func TestPlainServerHasNoTLS(t *testing.T) {
	s := Start(t)
	if s.ClientTLSConfig() != nil {
		t.Errorf("got a client TLS config from a plain server, want nil")
	}
	c := dial(t, s)
	if err := c.Hello("localhost"); err != nil {
		t.Fatalf("hello: %v", err)
	}
	if ok, _ := c.Extension("STARTTLS"); ok {
		t.Errorf("plain server advertises STARTTLS")
	}
}

func TestAuth(t *testing.T) {
	tests := []struct {
		name     string
		user     string
		pass     string
		wantCode int // 0: accepted
	}{
		{"right credentials", "user", "secret", 0},
		{"wrong password", "user", "wrong", 535},
		{"unknown user", "nobody", "secret", 535},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Start(t, WithAuth("user", "secret"))
			c := dial(t, s)
			err := c.Auth(sasl.NewPlainClient("", tt.user, tt.pass))
			if got := code(err); got != tt.wantCode {
				t.Fatalf("got code %d (%v), want %d", got, err, tt.wantCode)
			}
		})
	}

	t.Run("mail before auth", func(t *testing.T) {
		s := Start(t, WithAuth("user", "secret"))
		err := send(t, dial(t, s), "a@example.com", []string{"b@example.com"}, rawMultipart)
		if got := code(err); got != 502 {
			t.Errorf("got code %d (%v), want 502", got, err)
		}
	})
}

func TestRejections(t *testing.T) {
	s := Start(t)
	c := dial(t, s)

	s.RejectData(554, [3]int{5, 7, 1}, "rejected by policy")
	err := send(t, c, "a@example.com", []string{"b@example.com"}, rawMultipart)
	var se *smtp.SMTPError
	if !errors.As(err, &se) || se.Code != 554 || se.EnhancedCode != (smtp.EnhancedCode{5, 7, 1}) ||
		se.Message != "rejected by policy" {
		t.Fatalf("got %v, want 554 5.7.1 rejected by policy", err)
	}
	if got := s.Count(); got != 0 {
		t.Errorf("got %d stored messages after a rejection, want 0", got)
	}

	s.AcceptData()
	s.RejectRecipient("gone@example.com")
	err = send(t, c, "a@example.com", []string{"gone@example.com"}, rawMultipart)
	if got := code(err); got != 550 {
		t.Errorf("got code %d (%v) for a rejected recipient, want 550", got, err)
	}
	if err := send(t, c, "a@example.com", []string{"b@example.com"}, rawMultipart); err != nil {
		t.Fatalf("send after AcceptData on the same connection: %v", err)
	}
	if got := s.Count(); got != 1 {
		t.Errorf("got %d messages, want 1", got)
	}
}

func TestConnectionsAndDrop(t *testing.T) {
	s := Start(t)
	c := dial(t, s)
	for range 3 {
		if err := send(t, c, "a@example.com", []string{"b@example.com"}, rawMultipart); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	if got := s.Connections(); got != 1 {
		t.Errorf("got %d connections for 3 messages on one client, want 1", got)
	}

	s.DropIdleConnections()
	if err := c.Noop(); err == nil {
		t.Errorf("NOOP on a dropped connection succeeded, want an error")
	}
	if err := send(t, dial(t, s), "a@example.com", []string{"b@example.com"}, rawMultipart); err != nil {
		t.Fatalf("send on a new connection after the drop: %v", err)
	}
	if got := s.Connections(); got != 2 {
		t.Errorf("got %d connections, want 2", got)
	}
}

func TestWaitForCount(t *testing.T) {
	s := Start(t)
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			c, err := smtp.Dial(s.Addr())
			if err != nil {
				t.Errorf("dial: %v", err)
				return
			}
			defer c.Close()
			if err := c.SendMail("a@example.com", []string{"b@example.com"}, strings.NewReader(rawMultipart)); err != nil {
				t.Errorf("send: %v", err)
			}
		})
	}
	s.WaitForCount(t, 5)
	wg.Wait()
	if got := s.Count(); got != 5 {
		t.Errorf("got %d messages, want 5", got)
	}
}

func code(err error) int {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		return se.Code
	}
	if err != nil {
		return -1
	}
	return 0
}

func TestRejectDataTimesThenAccept(t *testing.T) {
	s := Start(t)
	s.RejectDataTimes(2, 451, [3]int{4, 3, 0}, "try again later")
	var codes []int
	for range 3 {
		err := send(t, dial(t, s), "a@example.com", []string{"b@example.org"}, "Subject: x\r\n\r\nbody\r\n")
		var se *smtp.SMTPError
		switch {
		case err == nil:
			codes = append(codes, 250)
		case errors.As(err, &se):
			codes = append(codes, se.Code)
		default:
			t.Fatalf("SendMail: %v", err)
		}
	}
	if fmt.Sprint(codes) != "[451 451 250]" || s.Count() != 1 {
		t.Errorf("got replies %v and %d stored, want [451 451 250] and 1", codes, s.Count())
	}
}

func TestDelayDataReplyStoresFirst(t *testing.T) {
	s := Start(t)
	s.DelayDataReply(time.Hour)
	done := make(chan error, 1)
	c := dial(t, s)
	go func() {
		done <- c.SendMail("a@example.com", []string{"b@example.org"}, strings.NewReader("Subject: x\r\n\r\nbody\r\n"))
	}()
	s.WaitForCount(t, 1)
	select {
	case err := <-done:
		t.Fatalf("the reply came before the delay: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	// Stopping the server ends the wait (checked by the test's cleanup).
}

func TestDelayDataReplyToDelaysOnlyThatRecipient(t *testing.T) {
	s := Start(t)
	s.DelayDataReplyTo("slow@example.org", time.Hour)
	done := make(chan error, 1)
	c := dial(t, s)
	go func() {
		done <- c.SendMail("a@example.com", []string{"slow@example.org"}, strings.NewReader("Subject: x\r\n\r\nbody\r\n"))
	}()
	s.WaitForCount(t, 1)
	if err := send(t, dial(t, s), "a@example.com", []string{"fast@example.org"}, "Subject: y\r\n\r\nbody\r\n"); err != nil {
		t.Fatalf("another recipient's message, sent meanwhile: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("the delayed recipient's reply came: %v", err)
	default:
	}
	if s.Count() != 2 {
		t.Errorf("%d messages stored, want 2", s.Count())
	}
}
