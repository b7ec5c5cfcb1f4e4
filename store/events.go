package store

import (
	"context"
	"slices"
	"time"

	"github.com/google/uuid"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Suppression reasons. A bounce or complaint adds an address on its own
// (a hard bounce only); manual is an operator's.
const (
	ReasonBounce    = "bounce"
	ReasonComplaint = "complaint"
	ReasonManual    = "manual"
)

// DeliveryEvent is a row of delivery_events: what happened to one message
// at one recipient after the provider took it (migration 0013).
type DeliveryEvent struct {
	ID        string `gorm:"primaryKey"`
	MessageID string
	Provider  string
	// EventKey is the provider's id for the event, unique per provider: an
	// event delivered twice is stored once.
	EventKey   string
	Type       string
	BounceType *string
	// Recipient is the canonical address (core/address Key).
	Recipient  string
	OccurredAt time.Time
	SMTPStatus *string `gorm:"column:smtp_status"`
	Diagnostic *string
	CreatedAt  time.Time
}

// Suppression is a row of suppressions: an address no send may go to.
type Suppression struct {
	// Email is the canonical address (core/address Key).
	Email  string `gorm:"primaryKey"`
	Reason string
	// Source says who added it: a provider's name, "smtp" for a bounce
	// read from the bounce mailbox, or "api".
	Source    string
	MessageID *string
	CreatedAt time.Time
}

// EventRecord is an event to record and the suppression it adds, if any.
type EventRecord struct {
	Event    DeliveryEvent
	Suppress *Suppression
	// Stored is set by RecordEvents when the event was new, Suppressed
	// when its suppression was too (the address was not on the list).
	Stored, Suppressed bool
}

// RecordEvents stores the events not stored before (by provider and event
// key) in one transaction, and adds the suppression of each one stored,
// unless the address is suppressed already (the first reason stays). An
// event seen before adds nothing: a bounce replayed after its address was
// removed from the list does not put it back. It gives every event a new
// id, returns how many were new, and marks them Stored (and Suppressed
// where their suppression was new).
//
// A provider posts a thousand events at once (SendGrid's arrays): they go
// in statements of eventChunk rows, not one each, which on PostgreSQL is a
// round trip each (issue 29: 2,600 of them made a 1 MiB array take a
// second). The rows stored are told apart by their new ids.
func (s *Store) RecordEvents(ctx context.Context, recs []EventRecord) (int, error) {
	if len(recs) == 0 {
		return 0, nil
	}
	evs := make([]DeliveryEvent, len(recs))
	for i := range recs {
		e := &recs[i].Event
		e.ID = uuid.NewString()
		e.OccurredAt, e.CreatedAt = utc(e.OccurredAt), utc(e.CreatedAt)
		evs[i] = *e
	}
	stored := 0
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for lo := 0; lo < len(evs); lo += eventChunk {
			chunk := evs[lo:min(lo+eventChunk, len(evs))]
			if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&chunk).Error; err != nil {
				return err
			}
			ids := make([]string, len(chunk))
			for i := range chunk {
				ids[i] = chunk[i].ID
			}
			var got []string
			if err := tx.Model(&DeliveryEvent{}).Where("id IN ?", ids).Pluck("id", &got).Error; err != nil {
				return err
			}
			in := make(map[string]bool, len(got))
			for _, id := range got {
				in[id] = true
			}
			for i := lo; i < lo+len(chunk); i++ {
				if in[recs[i].Event.ID] {
					recs[i].Stored = true
					stored++
				}
			}
		}
		return addSuppressions(tx, recs)
	})
	if err != nil {
		return 0, wrap(err, "record delivery events")
	}
	return stored, nil
}

// eventChunk is how many rows one INSERT of RecordEvents writes: 11
// columns each stay far under SQLite's 32,766 parameters and PostgreSQL's
// 65,535.
const eventChunk = 500

// addSuppressions adds the suppressions of the records stored, the first
// for each address, unless it is on the list already, and marks those
// added Suppressed.
func addSuppressions(tx *gorm.DB, recs []EventRecord) error {
	first := map[string]int{} // address → its first record
	var emails []string
	for i, r := range recs {
		if !r.Stored || r.Suppress == nil {
			continue
		}
		if _, ok := first[r.Suppress.Email]; !ok {
			first[r.Suppress.Email] = i
			emails = append(emails, r.Suppress.Email)
		}
	}
	for lo := 0; lo < len(emails); lo += eventChunk {
		batch := emails[lo:min(lo+eventChunk, len(emails))]
		var listed []string
		if err := tx.Model(&Suppression{}).Where("email IN ?", batch).Pluck("email", &listed).Error; err != nil {
			return err
		}
		var add []Suppression
		for _, e := range batch {
			if slices.Contains(listed, e) {
				continue
			}
			i := first[e]
			sp := *recs[i].Suppress
			sp.CreatedAt = utc(sp.CreatedAt)
			add = append(add, sp)
			recs[i].Suppressed = true
		}
		if len(add) == 0 {
			continue
		}
		// DoNothing: another server's event may add one meanwhile.
		if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&add).Error; err != nil {
			return err
		}
	}
	return nil
}

// MessagesByProviderID maps each of ids that names a message of ours (its
// provider_message_id) to that message's id. An id that names none is
// absent.
func (s *Store) MessagesByProviderID(ctx context.Context, ids []string) (map[string]string, error) {
	out := make(map[string]string, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	var rows []struct {
		ID                string
		ProviderMessageID string
	}
	err := s.db.WithContext(ctx).Model(&Message{}).Select("id", "provider_message_id").
		Where("provider_message_id IN ?", ids).Find(&rows).Error
	if err != nil {
		return nil, wrap(err, "messages by provider id")
	}
	for _, r := range rows {
		out[r.ProviderMessageID] = r.ID
	}
	return out, nil
}

// MessageEvents returns a message's delivery events, oldest first.
func (s *Store) MessageEvents(ctx context.Context, messageID string) ([]DeliveryEvent, error) {
	var evs []DeliveryEvent
	err := s.db.WithContext(ctx).Where("message_id = ?", messageID).
		Order("occurred_at, created_at, id").Find(&evs).Error
	return evs, wrap(err, "events of message %s", messageID)
}

// Suppressed returns the suppressions of those of emails (canonical) that
// are on the list, in no particular order: empty when none is.
func (s *Store) Suppressed(ctx context.Context, emails []string) ([]Suppression, error) {
	if len(emails) == 0 {
		return nil, nil
	}
	var out []Suppression
	err := s.db.WithContext(ctx).Where("email IN ?", emails).Find(&out).Error
	return out, wrap(err, "suppressed recipients")
}

// SuppressionFilter selects suppressions for Suppressions; empty fields do
// not filter.
type SuppressionFilter struct {
	Email  string // canonical: one address
	Reason string
	Limit  int
	Offset int
}

// Suppressions returns a page of the list, newest first, and how many
// match in all.
func (s *Store) Suppressions(ctx context.Context, f SuppressionFilter) ([]Suppression, int64, error) {
	q := s.db.WithContext(ctx).Model(&Suppression{})
	if f.Email != "" {
		q = q.Where("email = ?", f.Email)
	}
	if f.Reason != "" {
		q = q.Where("reason = ?", f.Reason)
	}
	var total int64
	if err := q.Count(&total).Error; err != nil {
		return nil, 0, wrap(err, "count suppressions")
	}
	var out []Suppression
	err := q.Order("created_at DESC, email").Limit(f.Limit).Offset(f.Offset).Find(&out).Error
	return out, total, wrap(err, "suppressions")
}

// AddSuppression adds sp unless its address is on the list already. It
// returns the row that is on the list and whether it is sp.
func (s *Store) AddSuppression(ctx context.Context, sp *Suppression) (*Suppression, bool, error) {
	sp.CreatedAt = utc(sp.CreatedAt)
	db := s.db.WithContext(ctx)
	res := db.Clauses(clause.OnConflict{DoNothing: true}).Create(sp)
	if res.Error != nil {
		return nil, false, wrap(res.Error, "add suppression")
	}
	if res.RowsAffected == 1 {
		return sp, true, nil
	}
	var held Suppression
	if err := db.Where("email = ?", sp.Email).Take(&held).Error; err != nil {
		// Removed between the two statements: add it again.
		return nil, false, wrap(err, "suppression %s", sp.Email)
	}
	return &held, false, nil
}

// DeleteSuppression removes email from the list: ErrNotFound if it is not
// on it.
func (s *Store) DeleteSuppression(ctx context.Context, email string) error {
	res := s.db.WithContext(ctx).Where("email = ?", email).Delete(&Suppression{})
	if res.Error != nil {
		return wrap(res.Error, "delete suppression")
	}
	if res.RowsAffected == 0 {
		return wrap(gorm.ErrRecordNotFound, "suppression %s", email)
	}
	return nil
}

// Reputation counts what a provider judges a sender by, since since: the
// messages sent, their hard bounces, and their complaints (events stored
// since then).
func (s *Store) Reputation(ctx context.Context, since time.Time) (sent, hardBounces, complaints int64, err error) {
	if err := s.db.WithContext(ctx).Model(&Message{}).Where("status = ? AND sent_at >= ?", StatusSent, utc(since)).
		Count(&sent).Error; err != nil {
		return 0, 0, 0, wrap(err, "count sent messages")
	}
	hardBounces, complaints, err = s.Complaints(ctx, since)
	return sent, hardBounces, complaints, err
}

// Complaints counts the hard bounces and the complaints stored since
// since.
func (s *Store) Complaints(ctx context.Context, since time.Time) (hardBounces, complaints int64, err error) {
	var row struct{ Hard, Complaints int64 }
	err = s.db.WithContext(ctx).Model(&DeliveryEvent{}).
		Select("COALESCE(SUM(CASE WHEN type = 'bounced' AND bounce_type = 'hard' THEN 1 ELSE 0 END), 0) AS hard, "+
			"COALESCE(SUM(CASE WHEN type = 'complained' THEN 1 ELSE 0 END), 0) AS complaints").
		Where("created_at >= ? AND type IN ('bounced', 'complained')", utc(since)).Take(&row).Error
	if err != nil {
		return 0, 0, wrap(err, "count bounces and complaints")
	}
	return row.Hard, row.Complaints, nil
}
