package store

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestMessagesFilters(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := mustCreateInbox(t, s, "alerts@example.com")
		b := mustCreateInbox(t, s, "billing@example.com")

		set := func(subject, body string) func(*Message) {
			return func(m *Message) { m.Subject, m.Text = subject, body }
		}
		hello, th := mustSend(t, s, a, nil, t0, set("Hello World", "first"))
		discount, _ := mustSend(t, s, a, th, t0.Add(time.Minute), set("50% off", "today only: axb"))
		fifty, _ := mustSend(t, s, a, nil, t0.Add(2*time.Minute), set("500 units", "a_b in the BODY"))
		invoice, _ := mustSend(t, s, b, nil, t0.Add(3*time.Minute), set("Invoice", "see attached"))
		// Same created_at as invoice: the id breaks the tie.
		tie, _ := mustSend(t, s, b, nil, t0.Add(3*time.Minute), set("Invoice 2", "x"))
		newer, older := invoice, tie
		if tie.ID > invoice.ID {
			newer, older = tie, invoice
		}

		tests := []struct {
			name  string
			f     MessageFilter
			want  []*Message
			total int64
		}{
			{"inbox, newest first", MessageFilter{InboxID: a.ID}, []*Message{fifty, discount, hello}, 3},
			{"thread", MessageFilter{ThreadID: th.ID}, []*Message{discount, hello}, 2},
			{"inbox and thread", MessageFilter{InboxID: b.ID, ThreadID: th.ID}, nil, 0},
			{"tie broken by id", MessageFilter{InboxID: b.ID}, []*Message{newer, older}, 2},
			{"q in subject, any case", MessageFilter{InboxID: a.ID, Query: "hELLO"}, []*Message{hello}, 1},
			{"q in body, any case", MessageFilter{InboxID: a.ID, Query: "body"}, []*Message{fifty}, 1},
			{"q in from address", MessageFilter{Query: "BILLING@"}, []*Message{newer, older}, 2},
			{"content only ignores the from address", MessageFilter{Query: "BILLING@", ContentOnly: true}, nil, 0},
			{"q percent is literal", MessageFilter{InboxID: a.ID, Query: "50%"}, []*Message{discount}, 1},
			{"q underscore is literal", MessageFilter{InboxID: a.ID, Query: "a_b"}, []*Message{fifty}, 1},
			{"q backslash is literal", MessageFilter{InboxID: a.ID, Query: `\`}, nil, 0},
			{"q no match", MessageFilter{InboxID: a.ID, Query: "nothing like it"}, nil, 0},
			{"page of two", MessageFilter{InboxID: a.ID, Limit: 2}, []*Message{fifty, discount}, 3},
			{"second page", MessageFilter{InboxID: a.ID, Limit: 2, Offset: 2}, []*Message{hello}, 3},
			{"past the end", MessageFilter{InboxID: a.ID, Limit: 2, Offset: 5}, nil, 3},
			{"unknown inbox", MessageFilter{InboxID: "nonexistent-inbox-id"}, nil, 0},
			{"since, inclusive", MessageFilter{InboxID: a.ID, Since: t0.Add(time.Minute)}, []*Message{fifty, discount}, 2},
			{"until, exclusive", MessageFilter{InboxID: a.ID, Until: t0.Add(2 * time.Minute)}, []*Message{discount, hello}, 2},
			{"since and until, every inbox", MessageFilter{Since: t0.Add(2 * time.Minute), Until: t0.Add(3 * time.Minute)}, []*Message{fifty}, 1},
			{"until in another zone", MessageFilter{InboxID: a.ID, Until: t0.Add(time.Minute).In(time.FixedZone("x", 5*3600))}, []*Message{hello}, 1},
			{"status, every inbox", MessageFilter{Status: StatusSent, Since: t0.Add(3 * time.Minute)}, []*Message{newer, older}, 2},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				ms, total, err := s.Messages(ctx, tt.f)
				if err != nil {
					t.Fatalf("Messages: %v", err)
				}
				if ms == nil {
					t.Error("got nil slice, want an empty one")
				}
				want := []string{}
				for _, m := range tt.want {
					want = append(want, m.Subject)
				}
				got := []string{}
				for _, m := range ms {
					got = append(got, m.Subject)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) || total != tt.total {
					t.Errorf("got %q total %d, want %q total %d", got, total, want, tt.total)
				}
			})
		}
	})
}
