package store

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestSendTimes(t *testing.T) {
	forEachDriver(t, func(t *testing.T, s *Store) {
		in := mustCreateInbox(t, s, "a@example.com")
		at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
		rows := []struct {
			status  string
			created time.Duration
			sent    *time.Time
		}{
			{StatusSent, -10 * time.Second, at(time.Minute)}, // created before, sent after: counts at sent_at
			{StatusSending, 2 * time.Minute, nil},            // in flight or interrupted: counts at created_at
			{StatusSending, 0, nil},                          // exactly at since: counts
			{StatusFailed, 3 * time.Minute, nil},             // gave its slot back
			{StatusSent, -2 * time.Minute, at(-time.Minute)}, // too old
			{StatusSending, -5 * time.Minute, nil},           // too old
			{StatusSent, 4 * time.Minute, at(4*time.Minute + 500*time.Microsecond)},
		}
		for _, r := range rows {
			mustSend(t, s, in, nil, t0.Add(r.created), func(m *Message) { m.Status, m.SentAt = r.status, r.sent })
		}

		got, err := s.SendTimes(context.Background(), t0.In(time.FixedZone("X", -7*3600)))
		if err != nil {
			t.Fatalf("SendTimes: %v", err)
		}
		want := []time.Time{t0, t0.Add(time.Minute), t0.Add(2 * time.Minute), t0.Add(4*time.Minute + 500*time.Microsecond)}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("got %v, want %v", got, want)
		}
		for _, g := range got {
			if g.Location() != time.UTC {
				t.Errorf("got %s in %v, want UTC", g, g.Location())
			}
		}
	})
}

func TestFailStaleSending(t *testing.T) {
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "a@example.com")
		sending := func(m *Message) { m.Status, m.SentAt = StatusSending, nil }
		stale, _ := mustSend(t, s, in, nil, t0.Add(-10*time.Minute), sending)
		fresh, _ := mustSend(t, s, in, nil, t0.Add(time.Second), sending)
		sent, _ := mustSend(t, s, in, nil, t0.Add(-20*time.Minute), nil)

		n, err := s.FailStaleSending(ctx, t0)
		if err != nil || n != 1 {
			t.Fatalf("got FailStaleSending (%d, %v), want (1, nil)", n, err)
		}
		tests := []struct {
			id, status, err string
		}{
			{stale.ID, StatusFailed, interruptedError},
			{fresh.ID, StatusSending, ""},
			{sent.ID, StatusSent, ""},
		}
		for _, tt := range tests {
			m, err := s.Message(ctx, tt.id)
			if err != nil {
				t.Fatalf("Message: %v", err)
			}
			gotErr := ""
			if m.Error != nil {
				gotErr = *m.Error
			}
			if m.Status != tt.status || gotErr != tt.err {
				t.Errorf("message %s: got %q %q, want %q %q", tt.id, m.Status, gotErr, tt.status, tt.err)
			}
		}
		if n, err := s.FailStaleSending(ctx, t0); err != nil || n != 0 {
			t.Errorf("got second FailStaleSending (%d, %v), want (0, nil)", n, err)
		}
	})
}
