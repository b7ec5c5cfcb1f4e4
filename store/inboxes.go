package store

import (
	"context"
	"errors"
	"sync"
	"time"

	"gorm.io/gorm"
)

// CreateInbox inserts in. An empty ID is filled with a new UUID; times are
// normalized in place to what the database keeps (UTC, microseconds), and a
// zero UpdatedAt is set to CreatedAt. A second inbox with the same
// EmailAddress fails with ErrConflict.
func (s *Store) CreateInbox(ctx context.Context, in *Inbox) error {
	newID(&in.ID)
	in.CreatedAt = utc(in.CreatedAt)
	if in.UpdatedAt.IsZero() {
		in.UpdatedAt = in.CreatedAt
	}
	in.UpdatedAt = utc(in.UpdatedAt)
	return wrap(s.db.WithContext(ctx).Create(in).Error, "create inbox %s", in.EmailAddress)
}

// Inbox returns the inbox with the given id, or ErrNotFound. On one
// server's database inboxes change only through this Store, so found
// inboxes are cached until UpdateInbox or DeleteInbox. On a database
// shared with other servers (ShareDatabase) it reads the database every
// time, as a GET does, so that a PATCH of an inbox's limits on one server
// holds on the next send through any other; the read refreshes the copy
// InboxCopy returns.
func (s *Store) Inbox(ctx context.Context, id string) (*Inbox, error) {
	if !s.shared.Load() {
		if in, _, ok := s.inboxes.get(id); ok {
			return &in, nil
		}
	}
	return s.readInbox(ctx, id)
}

// InboxCopy is Inbox for a send: on a shared database it returns the copy
// this Store last read, which another server may have changed since. A
// send judged by a copy records its message with the copy as the slot's
// JudgedBy, and the record checks it in the same statement: the send goes
// ahead only if the inbox still reads as the copy does (ErrInboxChanged
// otherwise). So a PATCH on one server holds on the next send through any
// other, as with Inbox, without a read of its own for every send: on a
// shared database that read was the largest part of a send's cost in the
// throttle's benchmarks (BENCHMARKS.md, section 16).
func (s *Store) InboxCopy(ctx context.Context, id string) (*Inbox, error) {
	if in, _, ok := s.inboxes.get(id); ok {
		return &in, nil
	}
	return s.readInbox(ctx, id)
}

// readInbox reads the inbox from the database and keeps the copy.
func (s *Store) readInbox(ctx context.Context, id string) (*Inbox, error) {
	if !isText(id) {
		return nil, notText("inbox", id)
	}
	_, gen, _ := s.inboxes.get(id)
	var in Inbox
	if err := s.db.WithContext(ctx).Where("id = ?", id).Take(&in).Error; err != nil {
		return nil, wrap(err, "inbox %s", id)
	}
	s.inboxes.put(in, gen)
	return &in, nil
}

// ErrInboxChanged is returned when a send judged by a copy of its inbox
// (SendSlot.JudgedBy) finds that the inbox has changed since the copy was
// read: nothing was recorded, and InboxCopy now returns the inbox as it is.
var ErrInboxChanged = errors.New("store: inbox changed since it was read")

// SameAs reports whether in and o say the same of everything a send takes
// from an inbox: its address, its name (the From header's) and its limits.
func (in *Inbox) SameAs(o *Inbox) bool {
	return in.ID == o.ID && in.EmailAddress == o.EmailAddress && in.Name == o.Name &&
		sameInt(in.RateLimitPerMinute, o.RateLimitPerMinute) && sameInt(in.RateLimitPerHour, o.RateLimitPerHour) &&
		sameInt(in.RateLimitPerDay, o.RateLimitPerDay)
}

func sameInt(a, b *int) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// judgedGuard is the condition a send judged by a copy of its inbox is
// recorded under: the inbox still reads as the copy does.
const judgedGuard = `EXISTS (SELECT 1 FROM inboxes WHERE id = ? AND email_address = ? AND name = ?
	AND rate_limit_per_minute IS NOT DISTINCT FROM CAST(? AS integer)
	AND rate_limit_per_hour IS NOT DISTINCT FROM CAST(? AS integer)
	AND rate_limit_per_day IS NOT DISTINCT FROM CAST(? AS integer))`

func judgedVars(in *Inbox) []any {
	return []any{in.ID, in.EmailAddress, in.Name, in.RateLimitPerMinute, in.RateLimitPerHour, in.RateLimitPerDay}
}

// judgedFailed tells why a send judged by copy was not recorded: the inbox
// is gone (ErrNotFound), it changed (ErrInboxChanged; the copy is
// refreshed), or neither, and the send's other parent, its thread, is
// gone (ErrNotFound).
func (s *Store) judgedFailed(ctx context.Context, copy *Inbox) error {
	s.inboxes.evict(copy.ID)
	in, err := s.readInbox(ctx, copy.ID)
	switch {
	case err != nil:
		return err
	case !in.SameAs(copy):
		return ErrInboxChanged
	}
	return gorm.ErrRecordNotFound
}

// Inboxes returns a page of inboxes ordered by address. limit <= 0 means no
// limit.
func (s *Store) Inboxes(ctx context.Context, limit, offset int) ([]Inbox, error) {
	ins := []Inbox{}
	err := s.db.WithContext(ctx).Order("email_address, id").
		Limit(noLimit(limit)).Offset(offset).Find(&ins).Error
	if err != nil {
		return nil, wrap(err, "list inboxes")
	}
	return ins, nil
}

// InboxChanges are the fields UpdateInbox writes; the rest stay as they are.
type InboxChanges struct {
	Name *string // nil: unchanged
	// SetPerMinute writes PerMinute (nil: back to the default); likewise
	// SetPerHour and SetPerDay.
	SetPerMinute, SetPerHour, SetPerDay bool
	PerMinute, PerHour, PerDay          *int
}

// UpdateInbox applies ch to inbox id at now and returns the inbox as
// stored, or ErrNotFound.
func (s *Store) UpdateInbox(ctx context.Context, id string, ch InboxChanges, now time.Time) (*Inbox, error) {
	if !isText(id) {
		return nil, notText("inbox", id)
	}
	defer s.inboxes.evict(id)
	cols := map[string]any{"updated_at": utc(now)}
	if ch.Name != nil {
		cols["name"] = *ch.Name
	}
	if ch.SetPerMinute {
		cols["rate_limit_per_minute"] = ch.PerMinute
	}
	if ch.SetPerHour {
		cols["rate_limit_per_hour"] = ch.PerHour
	}
	if ch.SetPerDay {
		cols["rate_limit_per_day"] = ch.PerDay
	}
	res := s.db.WithContext(ctx).Model(&Inbox{}).Where("id = ?", id).Updates(cols)
	if res.Error != nil {
		return nil, wrap(res.Error, "update inbox %s", id)
	}
	if res.RowsAffected == 0 {
		return nil, wrap(gorm.ErrRecordNotFound, "update inbox %s", id)
	}
	s.inboxes.evict(id)
	return s.Inbox(ctx, id)
}

// noLimit turns the store's "limit <= 0 means all" into gorm's -1.
func noLimit(limit int) int {
	if limit <= 0 {
		return -1
	}
	return limit
}

// inboxCacheMax bounds the cache; past it the cache starts over.
const inboxCacheMax = 10000

// inboxCache holds inboxes read from the database. On one server's
// database this Store is the only writer, and the cache is current. A
// generation counter, bumped by every eviction, keeps a read that raced
// with a delete from caching the deleted inbox.
type inboxCache struct {
	mu  sync.RWMutex
	m   map[string]Inbox
	gen uint64
}

// get returns the cached inbox, or the generation to pass to put after
// reading it from the database.
func (c *inboxCache) get(id string) (Inbox, uint64, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	in, ok := c.m[id]
	return in, c.gen, ok
}

func (c *inboxCache) put(in Inbox, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if c.m == nil || len(c.m) >= inboxCacheMax {
		c.m = make(map[string]Inbox)
	}
	c.m[in.ID] = in
}

func (c *inboxCache) evict(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
	c.gen++
}

// BusiestInboxes returns up to limit inboxes with the most sends in the
// throttle's log counted since since or still in flight, busiest first:
// one grouped statement on send_log's counted_at index, whatever the
// number of inboxes, for the dashboard's overview.
func (s *Store) BusiestInboxes(ctx context.Context, since time.Time, limit int) ([]Inbox, error) {
	ins := []Inbox{}
	busy := s.db.WithContext(ctx).Model(&SendSlot{}).Select("scope, count(*) AS n").
		Where("scope <> '' AND (counted_at >= ? OR counted_at IS NULL)", utc(since)).Group("scope")
	err := s.db.WithContext(ctx).Table("inboxes").Select("inboxes.*").
		Joins("JOIN (?) AS b ON b.scope = inboxes.email_address", busy).
		Order("b.n DESC, inboxes.email_address").Limit(noLimit(limit)).Find(&ins).Error
	if err != nil {
		return nil, wrap(err, "busiest inboxes since %s", since)
	}
	return ins, nil
}
