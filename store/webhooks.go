package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// WebhookEndpoint is a row of webhook_endpoints: where an application
// wants its events (webhooks out, issue 30).
type WebhookEndpoint struct {
	ID          string `gorm:"primaryKey"`
	URL         string
	Events      StringList
	Description string
	Enabled     bool
	// DisabledReason says why the server disabled it (a 410, failures);
	// nil when enabled, or disabled by its owner.
	DisabledReason *string
	Secret         string
	// PreviousSecret signs beside Secret until PreviousUntil: a rotation's
	// overlap.
	PreviousSecret *string
	PreviousUntil  *time.Time
	// FailingSince is when its current streak of failed attempts began;
	// nil after a success.
	FailingSince *time.Time
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Wants reports whether the endpoint takes events of type t.
func (e *WebhookEndpoint) Wants(t string) bool {
	for _, w := range e.Events {
		if w == t {
			return true
		}
	}
	return false
}

// Secrets are the secrets that sign its events at now: the current one,
// and the previous one during a rotation's overlap.
func (e *WebhookEndpoint) Secrets(now time.Time) []string {
	s := []string{e.Secret}
	if e.PreviousSecret != nil && e.PreviousUntil != nil && now.Before(*e.PreviousUntil) {
		s = append(s, *e.PreviousSecret)
	}
	return s
}

// WebhookEvent is a row of webhook_events: an event as delivered, its id
// the webhook-id header and Payload the exact body.
type WebhookEvent struct {
	ID        string `gorm:"primaryKey"`
	Type      string
	Payload   string
	CreatedAt time.Time
}

// WebhookDelivery is a row of webhook_deliveries: one attempt to deliver
// an event to an endpoint.
type WebhookDelivery struct {
	ID           string `gorm:"primaryKey"`
	EndpointID   string
	EventID      string
	EventType    string
	Attempt      int
	StatusCode   *int
	LatencyMS    int64 `gorm:"column:latency_ms"`
	Error        *string
	ResponseBody *string
	NextRetryAt  *time.Time
	CreatedAt    time.Time
}

// OutboxEvent is a row of webhook_outbox, written by the database's
// triggers in the transaction that changed what it tells of: a message's
// status (Status, and its error as Detail), a provider's delivery event
// or a suppression (Recipient and Detail).
type OutboxEvent struct {
	Seq       int64
	Type      string
	MessageID *string
	Status    *string
	Recipient *string
	Detail    *string
	CreatedAt time.Time
}

// CreateWebhookEndpoint stores e.
func (s *Store) CreateWebhookEndpoint(ctx context.Context, e *WebhookEndpoint) error {
	newID(&e.ID)
	now := time.Now().UTC()
	e.CreatedAt, e.UpdatedAt = now, now
	return wrap(s.db.WithContext(ctx).Create(e).Error, "create webhook endpoint")
}

// WebhookEndpoint returns endpoint id (ErrNotFound if there is none).
func (s *Store) WebhookEndpoint(ctx context.Context, id string) (*WebhookEndpoint, error) {
	var e WebhookEndpoint
	err := s.db.WithContext(ctx).Take(&e, "id = ?", id).Error
	return &e, wrap(err, "webhook endpoint %s", id)
}

// WebhookEndpoints returns every endpoint, oldest first.
func (s *Store) WebhookEndpoints(ctx context.Context) ([]WebhookEndpoint, error) {
	var es []WebhookEndpoint
	err := s.db.WithContext(ctx).Order("created_at, id").Find(&es).Error
	return es, wrap(err, "webhook endpoints")
}

// UpdateWebhookEndpoint changes endpoint id with change, in a transaction
// that holds its row, and returns it as stored.
func (s *Store) UpdateWebhookEndpoint(ctx context.Context, id string, change func(e *WebhookEndpoint) error) (*WebhookEndpoint, error) {
	var e WebhookEndpoint
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		q := tx
		if s.driver == DriverPostgres {
			q = q.Clauses(clause.Locking{Strength: "UPDATE"})
		}
		if err := q.Take(&e, "id = ?", id).Error; err != nil {
			return err
		}
		if err := change(&e); err != nil {
			return err
		}
		e.UpdatedAt = time.Now().UTC()
		return tx.Save(&e).Error
	})
	return &e, wrap(err, "update webhook endpoint %s", id)
}

// DeleteWebhookEndpoint deletes endpoint id and its delivery log; its
// jobs find it gone and deliver nothing.
func (s *Store) DeleteWebhookEndpoint(ctx context.Context, id string) error {
	res := s.db.WithContext(ctx).Delete(&WebhookEndpoint{}, "id = ?", id)
	if res.Error == nil && res.RowsAffected == 0 {
		return wrap(gorm.ErrRecordNotFound, "delete webhook endpoint %s", id)
	}
	return wrap(res.Error, "delete webhook endpoint %s", id)
}

// DisabledWebhookEndpoints counts the endpoints that are not enabled.
func (s *Store) DisabledWebhookEndpoints(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.WithContext(ctx).Model(&WebhookEndpoint{}).Where("NOT enabled").Count(&n).Error
	return n, wrap(err, "count disabled webhook endpoints")
}

// WebhookEvent returns event id.
func (s *Store) WebhookEvent(ctx context.Context, id string) (*WebhookEvent, error) {
	var e WebhookEvent
	err := s.db.WithContext(ctx).Take(&e, "id = ?", id).Error
	return &e, wrap(err, "webhook event %s", id)
}

// WebhookDeliveryFilter pages an endpoint's delivery log.
type WebhookDeliveryFilter struct {
	EndpointID    string
	EventID       string // "": every event
	Limit, Offset int
}

// WebhookDeliveries returns an endpoint's attempts, oldest first, and
// how many there are in all.
func (s *Store) WebhookDeliveries(ctx context.Context, f WebhookDeliveryFilter) ([]WebhookDelivery, int64, error) {
	q := s.db.WithContext(ctx).Model(&WebhookDelivery{}).Where("endpoint_id = ?", f.EndpointID)
	if f.EventID != "" {
		q = q.Where("event_id = ?", f.EventID)
	}
	var n int64
	if err := q.Count(&n).Error; err != nil {
		return nil, 0, wrap(err, "count webhook deliveries of %s", f.EndpointID)
	}
	var ds []WebhookDelivery
	err := q.Order("created_at, id").Limit(f.Limit).Offset(f.Offset).Find(&ds).Error
	return ds, n, wrap(err, "webhook deliveries of %s", f.EndpointID)
}

// LatestWebhookDeliveries returns an endpoint's last n attempts, newest
// first: one read backwards along webhook_deliveries_endpoint_idx that
// stops at n, however long the log (counting it to page to its end would
// read all of it).
func (s *Store) LatestWebhookDeliveries(ctx context.Context, endpointID string, n int) ([]WebhookDelivery, error) {
	var ds []WebhookDelivery
	err := s.db.WithContext(ctx).Where("endpoint_id = ?", endpointID).
		Order("created_at DESC, id DESC").Limit(n).Find(&ds).Error
	return ds, wrap(err, "latest webhook deliveries of %s", endpointID)
}

// WebhookDelivery returns attempt id of endpoint endpointID.
func (s *Store) WebhookDelivery(ctx context.Context, endpointID, id string) (*WebhookDelivery, error) {
	var d WebhookDelivery
	err := s.db.WithContext(ctx).Take(&d, "id = ? AND endpoint_id = ?", id, endpointID).Error
	return &d, wrap(err, "webhook delivery %s of %s", id, endpointID)
}

// WebhookHealth is when an endpoint that keeps failing is disabled.
type WebhookHealth struct {
	// MaxFailures failed attempts in a row disable it once it has been
	// failing for MinFailing: in a burst, an endpoint down for a second
	// fails a hundred attempts before any retry can succeed, and must not
	// be disabled for that.
	MaxFailures int
	MinFailing  time.Duration
	// MaxFailing without a success disables it whatever the count.
	MaxFailing time.Duration
}

// RecordWebhookAttempt writes attempt d of endpoint ep (as the attempt
// read it) and the endpoint's health: a success ends its failing streak,
// a failure starts one, and disables the endpoint once it passes h. It
// returns the reason the endpoint was disabled by this attempt, or "".
//
// The streak is one timestamp, failing_since, written only where it
// starts and ends: a count on the endpoint's row, written by every
// attempt, made that row the one lock every delivery to the endpoint
// queued on (a burst of 40,000 attempts to one endpoint delivered at 0.43
// of the send rate). "In a row" is the attempts logged since the streak
// began, counted only once it is MinFailing old.
func (s *Store) RecordWebhookAttempt(ctx context.Context, d *WebhookDelivery, ok bool, ep *WebhookEndpoint, h WebhookHealth) (disabled string, err error) {
	newID(&d.ID)
	now := time.Now().UTC()
	d.CreatedAt = now
	db := s.db.WithContext(ctx)
	// database/sql, without gorm's reflection: every attempt writes one.
	if _, err := s.sqlDB.ExecContext(ctx, s.rebind(`INSERT INTO webhook_deliveries (id, endpoint_id, event_id,
		event_type, attempt, status_code, latency_ms, error, response_body, next_retry_at, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`), d.ID, d.EndpointID, d.EventID, d.EventType, d.Attempt,
		d.StatusCode, d.LatencyMS, d.Error, d.ResponseBody, utcPtr(d.NextRetryAt), d.CreatedAt); err != nil {
		return "", wrap(err, "record webhook attempt on %s", d.EndpointID)
	}
	endpoint := db.Model(&WebhookEndpoint{}).Where("id = ?", d.EndpointID)
	switch {
	case ok && ep.FailingSince != nil:
		err = endpoint.Where("failing_since IS NOT NULL").Update("failing_since", nil).Error
	case ok:
	case ep.FailingSince == nil:
		err = endpoint.Where("failing_since IS NULL").Update("failing_since", now).Error
	default:
		failing := now.Sub(*ep.FailingSince)
		switch {
		case failing >= h.MaxFailing:
			disabled = fmt.Sprintf("failing: no success since %s", ep.FailingSince.UTC().Format(time.RFC3339))
		case failing >= h.MinFailing:
			var n int64
			if err := db.Model(&WebhookDelivery{}).Where("endpoint_id = ? AND created_at >= ?", d.EndpointID, *ep.FailingSince).
				Count(&n).Error; err != nil {
				return "", wrap(err, "count failed attempts on %s", d.EndpointID)
			}
			if n >= int64(h.MaxFailures) {
				disabled = fmt.Sprintf("failing: %d attempts in a row failed over %s", n, failing.Round(time.Minute))
			}
		}
		if disabled != "" {
			err = disableEndpoint(db, d.EndpointID, disabled, now)
		}
	}
	if err != nil {
		disabled = ""
	}
	return disabled, wrap(err, "record webhook endpoint health of %s", d.EndpointID)
}

// WebhookDeliveryJob reads what a delivery needs, in one statement: the
// endpoint and the event (ErrNotFound if either is gone). It is every
// attempt's read: database/sql, without gorm's reflection.
func (s *Store) WebhookDeliveryJob(ctx context.Context, endpointID, eventID string) (*WebhookEndpoint, *WebhookEvent, error) {
	var (
		e                    WebhookEndpoint
		ev                   = WebhookEvent{ID: eventID}
		prevUntil, failingAt any
	)
	e.ID = endpointID
	err := s.sqlDB.QueryRowContext(ctx, s.rebind(`SELECT e.url, e.events, e.enabled, e.secret, e.previous_secret,
		e.previous_until, e.failing_since, v.type, v.payload FROM webhook_endpoints e, webhook_events v
		WHERE e.id = ? AND v.id = ?`), endpointID, eventID).Scan(&e.URL, &e.Events, &e.Enabled, &e.Secret,
		&e.PreviousSecret, &prevUntil, &failingAt, &ev.Type, &ev.Payload)
	if errors.Is(err, sql.ErrNoRows) {
		err = gorm.ErrRecordNotFound
	}
	if err == nil {
		e.PreviousUntil, err = scanOptTime(prevUntil)
	}
	if err == nil {
		e.FailingSince, err = scanOptTime(failingAt)
	}
	if err != nil {
		return nil, nil, wrap(err, "webhook delivery of %s to %s", eventID, endpointID)
	}
	return &e, &ev, nil
}

// scanOptTime is scanTime of a nullable column.
func scanOptTime(v any) (*time.Time, error) {
	if v == nil {
		return nil, nil
	}
	t, err := scanTime(v)
	return &t, err
}

// DisableWebhookEndpoint disables endpoint id for reason (a 410).
func (s *Store) DisableWebhookEndpoint(ctx context.Context, id, reason string) error {
	return wrap(disableEndpoint(s.db.WithContext(ctx), id, reason, time.Now().UTC()), "disable webhook endpoint %s", id)
}

func disableEndpoint(db *gorm.DB, id, reason string, now time.Time) error {
	return db.Model(&WebhookEndpoint{}).Where("id = ? AND enabled", id).
		Updates(map[string]any{"enabled": false, "disabled_reason": reason, "updated_at": now}).Error
}

// PruneWebhookEvents deletes the events written before before, and with
// them their delivery log; it returns how many.
func (s *Store) PruneWebhookEvents(ctx context.Context, before time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Where("created_at < ?", before.UTC()).Delete(&WebhookEvent{})
	return res.RowsAffected, wrap(res.Error, "prune webhook events")
}

// OutboxPlan turns outbox events into what is delivered: the events to
// store and the job that delivers them (written in the same transaction).
// messages holds the messages the events name that still exist, without
// their bodies; endpoints the endpoints enabled.
type OutboxPlan func(events []OutboxEvent, messages map[string]*Message, endpoints []WebhookEndpoint) ([]WebhookEvent, JobTx, error)

// RelayOutbox takes up to limit outbox events, oldest first, and in one
// transaction stores what plan makes of them, writes its jobs and deletes
// them: each is relayed once, whatever crashes. On PostgreSQL the rows are
// locked (SKIP LOCKED), so that servers relay side by side. It returns how
// many it took.
func (s *Store) RelayOutbox(ctx context.Context, limit int, plan OutboxPlan) (int, error) {
	var n int
	err := s.inTx(ctx, func(tx *gorm.DB, sqlTx *sql.Tx) error {
		q := "SELECT seq, type, message_id, status, recipient, detail, created_at FROM webhook_outbox ORDER BY seq LIMIT ?"
		if s.driver == DriverPostgres {
			q += " FOR UPDATE SKIP LOCKED"
		}
		rows, err := sqlTx.QueryContext(ctx, s.rebind(q), limit)
		if err != nil {
			return err
		}
		var evs []OutboxEvent
		for rows.Next() {
			var e OutboxEvent
			var at any
			if err := rows.Scan(&e.Seq, &e.Type, &e.MessageID, &e.Status, &e.Recipient, &e.Detail, &at); err != nil {
				rows.Close()
				return err
			}
			if e.CreatedAt, err = scanTime(at); err != nil {
				rows.Close()
				return err
			}
			evs = append(evs, e)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if n = len(evs); n == 0 {
			return nil
		}
		ids := make([]string, 0, n)
		seqs := make([]int64, n)
		for i, e := range evs {
			seqs[i] = e.Seq
			if e.MessageID != nil {
				ids = append(ids, *e.MessageID)
			}
		}
		var ms []Message
		if len(ids) > 0 {
			if err := tx.Select(s.headColumns()).Where("id IN ?", ids).Find(&ms).Error; err != nil {
				return err
			}
		}
		byID := make(map[string]*Message, len(ms))
		for i := range ms {
			byID[ms[i].ID] = &ms[i]
		}
		var eps []WebhookEndpoint
		if err := tx.Where("enabled").Order("created_at, id").Find(&eps).Error; err != nil {
			return err
		}
		stored, job, err := plan(evs, byID, eps)
		if err != nil {
			return err
		}
		if len(stored) > 0 {
			if err := tx.CreateInBatches(stored, 500).Error; err != nil {
				return err
			}
		}
		if job != nil {
			if err := job(ctx, sqlTx); err != nil {
				return err
			}
		}
		return tx.Exec("DELETE FROM webhook_outbox WHERE seq IN ?", seqs).Error
	})
	return n, wrap(err, "relay webhook outbox")
}

// OldestOutboxEvent is when the oldest event not yet relayed was written.
func (s *Store) OldestOutboxEvent(ctx context.Context) (time.Time, bool, error) {
	var at any
	err := s.sqlDB.QueryRowContext(ctx, "SELECT created_at FROM webhook_outbox ORDER BY seq LIMIT 1").Scan(&at)
	if err == sql.ErrNoRows {
		return time.Time{}, false, nil
	} else if err != nil {
		return time.Time{}, false, wrap(err, "oldest webhook outbox event")
	}
	t, err := scanTime(at)
	return t, err == nil, wrap(err, "oldest webhook outbox event")
}

// rebind writes q's ? placeholders as the driver wants them.
func (s *Store) rebind(q string) string {
	if s.driver != DriverPostgres {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// scanTime reads a timestamp column read into any: PostgreSQL's driver
// gives a time.Time, SQLite's a time.Time or, for a default written by
// strftime, its text.
func scanTime(v any) (time.Time, error) {
	switch t := v.(type) {
	case time.Time:
		return t.UTC(), nil
	case string:
		return parseSQLiteTime(t)
	case []byte:
		return parseSQLiteTime(string(t))
	}
	return time.Time{}, fmt.Errorf("store: a timestamp of type %T", v)
}

func parseSQLiteTime(s string) (time.Time, error) {
	for _, layout := range []string{"2006-01-02 15:04:05.999999999", time.RFC3339Nano, "2006-01-02 15:04:05.999999999-07:00"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("store: timestamp %q", s)
}
