package store

import (
	"cmp"
	"context"
	"slices"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// SendCount is a row of send_counts: how many sends ended with an outcome,
// or were refused for a reason (Kind), in the minute or the hour (Width)
// that begins at Start.
type SendCount struct {
	Width string    `gorm:"primaryKey"`
	Start time.Time `gorm:"primaryKey"`
	Kind  string    `gorm:"primaryKey"`
	Count int64
}

// The widths of send_counts' buckets.
const (
	WidthMinute = "minute"
	WidthHour   = "hour"
)

// Tally is a count to add to send_counts: N of Kind in the minute that
// begins at Minute.
type Tally struct {
	Minute time.Time
	Kind   string
	N      int64
}

// AddSendCounts adds ts to their minutes and to the hours that hold them,
// in one statement. The rows are written in key order, so that servers
// adding at once never wait on each other's rows in opposite orders.
func (s *Store) AddSendCounts(ctx context.Context, ts []Tally) error {
	type key struct {
		width string
		start time.Time
		kind  string
	}
	sum := map[key]int64{}
	for _, t := range ts {
		if t.N == 0 {
			continue
		}
		m := utc(t.Minute).Truncate(time.Minute)
		sum[key{WidthMinute, m, t.Kind}] += t.N
		sum[key{WidthHour, m.Truncate(time.Hour), t.Kind}] += t.N
	}
	if len(sum) == 0 {
		return nil
	}
	rows := make([]SendCount, 0, len(sum))
	for k, n := range sum {
		rows = append(rows, SendCount{Width: k.width, Start: k.start, Kind: k.kind, Count: n})
	}
	slices.SortFunc(rows, func(a, b SendCount) int {
		return cmp.Or(cmp.Compare(a.Width, b.Width), a.Start.Compare(b.Start), cmp.Compare(a.Kind, b.Kind))
	})
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "width"}, {Name: "start"}, {Name: "kind"}},
		DoUpdates: clause.Assignments(map[string]any{"count": gorm.Expr("send_counts.count + excluded.count")}),
	}).Create(&rows).Error
	return wrap(err, "add send counts")
}

// SendCounts reads the buckets of width that begin in [from, to), oldest
// first: one range of the primary key.
func (s *Store) SendCounts(ctx context.Context, width string, from, to time.Time) ([]SendCount, error) {
	var out []SendCount
	err := s.db.WithContext(ctx).Where("width = ? AND start >= ? AND start < ?", width, utc(from), utc(to)).
		Order("start, kind").Find(&out).Error
	return out, wrap(err, "read send counts")
}

// PruneSendCounts deletes the buckets of width that begin before before.
func (s *Store) PruneSendCounts(ctx context.Context, width string, before time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Where("width = ? AND start < ?", width, utc(before)).Delete(&SendCount{})
	return res.RowsAffected, wrap(res.Error, "prune send counts")
}
