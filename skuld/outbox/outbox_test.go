package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/nornweave/nornweave/store"
)

// jobs records what the relay would write.
type jobs struct{ inserted []river.InsertManyParams }

func (j *jobs) InsertTx(_ context.Context, _ *sql.Tx, js []river.InsertManyParams) error {
	j.inserted = append(j.inserted, js...)
	return nil
}
func (j *jobs) Insert(context.Context, river.JobArgs, *river.InsertOpts) error { return nil }
func (j *jobs) OldestJob(context.Context, ...string) (time.Time, bool, error) {
	return time.Time{}, false, nil
}

func ptr[T any](v T) *T { return &v }

// The relay's plan: an event goes to the endpoints that want its type, one
// job each, and to no other; the data is the message as it was when the
// event happened; an event whose message is gone carries what is left;
// an event nobody wants is stored nowhere.
func TestPlan(t *testing.T) {
	j := &jobs{}
	w := New(Options{Render: func(m *store.Message, recipient, detail *string) any {
		return map[string]any{"id": m.ID, "status": m.Status, "error": m.Error, "recipient": recipient}
	}})
	w.jobs = j
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	evs := []store.OutboxEvent{
		{Seq: 1, Type: "message.queued", MessageID: ptr("m1"), Status: ptr("queued"), CreatedAt: at},
		{Seq: 2, Type: "message.sent", MessageID: ptr("m1"), Status: ptr("sent"), CreatedAt: at},
		{Seq: 3, Type: "message.bounced", MessageID: ptr("gone"), Recipient: ptr("bob@example.org"), Detail: ptr("hard 5.1.1"), CreatedAt: at},
		{Seq: 4, Type: "message.canceled", MessageID: ptr("m1"), Status: ptr("canceled"), CreatedAt: at},
	}
	msgs := map[string]*store.Message{"m1": {ID: "m1", Status: "sent"}}
	eps := []store.WebhookEndpoint{
		{ID: "a", Events: store.StringList{"message.queued", "message.sent"}},
		{ID: "b", Events: store.StringList{"message.sent", "message.bounced"}},
	}
	stored, job, err := w.plan(evs, msgs, eps)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 3 {
		t.Fatalf("%d events stored, want 3 (message.canceled is wanted by none)", len(stored))
	}
	if err := job(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range j.inserted {
		a := p.Args.(deliverArgs)
		got = append(got, a.EndpointID)
		if p.InsertOpts.Queue != queueName || p.InsertOpts.MaxAttempts != len(w.o.Schedule) {
			t.Errorf("job options %+v", p.InsertOpts)
		}
	}
	if want := []string{"a", "a", "b", "b"}; len(got) != 4 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Fatalf("jobs for endpoints %v, want %v", got, want)
	}
	var queued, bounced struct {
		Type      string         `json:"type"`
		Timestamp time.Time      `json:"timestamp"`
		Data      map[string]any `json:"data"`
	}
	if err := json.Unmarshal([]byte(stored[0].Payload), &queued); err != nil {
		t.Fatal(err)
	}
	if queued.Type != "message.queued" || queued.Data["status"] != "queued" || !queued.Timestamp.Equal(at) {
		t.Errorf("message.queued = %s, want the message as it was: queued", stored[0].Payload)
	}
	if err := json.Unmarshal([]byte(stored[2].Payload), &bounced); err != nil {
		t.Fatal(err)
	}
	if bounced.Data["id"] != "gone" || bounced.Data["recipient"] != "bob@example.org" || bounced.Data["detail"] != "hard 5.1.1" {
		t.Errorf("event of a deleted message = %s", stored[2].Payload)
	}
	if stored[0].ID == stored[1].ID || stored[0].ID[:4] != "evt_" {
		t.Errorf("event ids %q %q", stored[0].ID, stored[1].ID)
	}
}

// Nothing wanted, nothing written: no job transaction at all.
func TestPlanNothingWanted(t *testing.T) {
	w := New(Options{Render: func(*store.Message, *string, *string) any { return nil }})
	stored, job, err := w.plan([]store.OutboxEvent{{Type: "message.sent"}}, nil, nil)
	if err != nil || len(stored) != 0 || job != nil {
		t.Fatalf("plan = %v, %v, %v", stored, job != nil, err)
	}
}
