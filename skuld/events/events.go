// Package events records what happened to sent mail after the provider
// took it: the delivery events a provider's webhook (or a bounce read from
// the bounce mailbox) reports, each tied to our message, and the
// suppressions they add. A hard bounce or a complaint puts its address on
// the suppression list; a soft bounce, a delay or anything else never
// does.
package events

import (
	"context"
	"strings"
	"time"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/providers/webhook"
	"github.com/nornweave/nornweave/store"
)

// Store is what the recorder needs from persistence.
type Store interface {
	MessagesByProviderID(ctx context.Context, ids []string) (map[string]string, error)
	RecordEvents(ctx context.Context, recs []store.EventRecord) (int, error)
}

// Observer is told what each batch did, for the metrics.
type Observer interface {
	// Recorded is told each event stored, by provider and type, and the
	// reason of the suppression it added ("" when none: not a hard bounce
	// or a complaint, or the address was on the list already).
	Recorded(provider, eventType, suppressedFor string)
	// Unknown is told each event about a message that is not ours.
	Unknown(provider string)
}

// Recorder ties events to messages and records them.
type Recorder struct {
	store    Store
	observer Observer
	now      func() time.Time
}

// New returns a Recorder; observer may be nil, now is the clock's wall
// time.
func New(st Store, observer Observer, now func() time.Time) *Recorder {
	return &Recorder{store: st, observer: observer, now: now}
}

// Result counts what a batch did: events stored, seen before, and about a
// message we do not know (ignored).
type Result struct {
	Stored, Seen, Unknown int
}

// Record stores provider's events (by their ProviderMessageID) that name a
// message of ours, once each, with the suppression a hard bounce or a
// complaint adds.
func (r *Recorder) Record(ctx context.Context, provider string, evs []webhook.Event) (Result, error) {
	var res Result
	if len(evs) == 0 {
		return res, nil
	}
	ids := make([]string, 0, len(evs))
	seen := make(map[string]bool, len(evs))
	for _, e := range evs {
		if !seen[e.ProviderMessageID] {
			seen[e.ProviderMessageID] = true
			ids = append(ids, e.ProviderMessageID)
		}
	}
	ours, err := r.store.MessagesByProviderID(ctx, ids)
	if err != nil {
		return res, err
	}
	recs := make([]store.EventRecord, 0, len(evs))
	for _, e := range evs {
		id, ok := ours[e.ProviderMessageID]
		if !ok {
			res.Unknown++
			if r.observer != nil {
				r.observer.Unknown(provider)
			}
			continue
		}
		recs = append(recs, r.record(provider, id, e))
	}
	return r.write(ctx, provider, recs, res)
}

// RecordOurs stores events about messages named by our own ids (a bounce
// read from the bounce mailbox names the message in its VERP address),
// which exist: an id that names none fails the batch.
func (r *Recorder) RecordOurs(ctx context.Context, provider string, evs map[string][]webhook.Event) (Result, error) {
	var recs []store.EventRecord
	for id, list := range evs {
		for _, e := range list {
			recs = append(recs, r.record(provider, id, e))
		}
	}
	return r.write(ctx, provider, recs, Result{})
}

// write records recs in one transaction and tells the observer.
func (r *Recorder) write(ctx context.Context, provider string, recs []store.EventRecord, res Result) (Result, error) {
	stored, err := r.store.RecordEvents(ctx, recs)
	if err != nil {
		return res, err
	}
	res.Stored, res.Seen = stored, len(recs)-stored
	if r.observer != nil {
		for _, rec := range recs {
			if !rec.Stored {
				continue
			}
			reason := ""
			if rec.Suppressed {
				reason = rec.Suppress.Reason
			}
			r.observer.Recorded(provider, rec.Event.Type, reason)
		}
	}
	return res, nil
}

// record is the row of event e of message id, with the suppression it
// adds.
func (r *Recorder) record(provider, id string, e webhook.Event) store.EventRecord {
	now := r.now().UTC()
	ev := store.DeliveryEvent{
		MessageID: id, Provider: provider, EventKey: e.ID, Type: e.Type,
		Recipient: Canonical(e.Recipient), OccurredAt: e.OccurredAt, CreatedAt: now,
		BounceType: opt(e.BounceType), SMTPStatus: opt(e.SMTPStatus), Diagnostic: opt(e.Diagnostic),
	}
	if ev.OccurredAt.IsZero() {
		ev.OccurredAt = now
	}
	rec := store.EventRecord{Event: ev}
	var reason string
	switch {
	case e.Type == webhook.Bounced && e.BounceType == webhook.Hard:
		reason = store.ReasonBounce
	case e.Type == webhook.Complained:
		reason = store.ReasonComplaint
	}
	if reason != "" {
		rec.Suppress = &store.Suppression{Email: ev.Recipient, Reason: reason, Source: provider, MessageID: &ev.MessageID, CreatedAt: now}
	}
	return rec
}

// Canonical is an address as the suppression list keeps it: core/address's
// Key (the addr-spec in lower case); a string that does not parse as an
// address is kept trimmed and in lower case, so that it still compares.
func Canonical(s string) string {
	if a, err := address.Parse(s); err == nil {
		return a.Key()
	}
	return strings.ToLower(strings.TrimSpace(s))
}

func opt(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
