package bounce_test

import (
	"strings"
	"testing"

	"github.com/nornweave/nornweave/providers/bounce"
)

func TestParseIMAPURL(t *testing.T) {
	tests := []struct {
		url  string
		want bounce.IMAPConfig
	}{
		{"imaps://bounces:s3cret@imap.example.com", bounce.IMAPConfig{
			Security: bounce.TLS, Addr: "imap.example.com:993", Host: "imap.example.com",
			Username: "bounces", Password: "s3cret", Mailbox: "INBOX", Processed: bounce.DefaultProcessed}},
		{"imaps://bounces%40example.com:p%40ss%2Fw:rd@imap.example.com:1993/Bounces?move_to=Bounces%2FDone", bounce.IMAPConfig{
			Security: bounce.TLS, Addr: "imap.example.com:1993", Host: "imap.example.com",
			Username: "bounces@example.com", Password: "p@ss/w:rd", Mailbox: "Bounces", Processed: "Bounces/Done"}},
		{"imap://u:p@imap.example.com/INBOX", bounce.IMAPConfig{
			Security: bounce.StartTLS, Addr: "imap.example.com:143", Host: "imap.example.com",
			Username: "u", Password: "p", Mailbox: "INBOX", Processed: bounce.DefaultProcessed}},
		{"IMAP://u:p@[::1]:1143/?starttls=false", bounce.IMAPConfig{
			Security: bounce.Plain, Addr: "[::1]:1143", Host: "::1",
			Username: "u", Password: "p", Mailbox: "INBOX", Processed: bounce.DefaultProcessed}},
		{"imap://u:p@mail/?starttls=true", bounce.IMAPConfig{
			Security: bounce.StartTLS, Addr: "mail:143", Host: "mail",
			Username: "u", Password: "p", Mailbox: "INBOX", Processed: bounce.DefaultProcessed}},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			got, err := bounce.ParseIMAPURL(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseIMAPURLRefuses(t *testing.T) {
	for _, raw := range []string{
		"",
		"https://u:p@imap.example.com",
		"imaps://imap.example.com",                     // no user
		"imaps://u@imap.example.com",                   // no password
		"imaps://u:@imap.example.com",                  // empty password
		"imaps://u:p@:993",                             // no host
		"imaps://u:p@imap.example.com:0",               // port
		"imaps://u:p@imap.example.com:99999",           // port
		"imaps://u:p@imap.example.com/?starttls=false", // no STARTTLS in TLS
		"imap://u:p@imap.example.com/?starttls=maybe",
		"imap://u:p@imap.example.com/?move_to=a&move_to=b",
		"imap://u:p@imap.example.com/?moveto=a", // a typo is not ignored
		"imap://u:p@imap.example.com/INBOX?move_to=inbox",
		"imap://u:p@imap.example.com/Bounces%2A",
		"imap://u:p@imap.example.com/?move_to=%25",
		"imap://u:p@imap.example.com/A%0AB",
		"imap://u:p@imap.example.com/#frag",
		"imap:u:p@imap.example.com",
	} {
		t.Run(raw, func(t *testing.T) {
			got, err := bounce.ParseIMAPURL(raw)
			if err == nil {
				t.Fatalf("accepted: %+v", got)
			}
			if strings.Contains(err.Error(), "p@") && strings.Contains(raw, ":p@") {
				t.Errorf("error quotes the password: %v", err)
			}
		})
	}
}
