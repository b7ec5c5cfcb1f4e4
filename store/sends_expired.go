package store

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// ResolveExpiredSends resolves the sends still in flight whose deadline
// was before before: a live server settles every send by its deadline, so
// these belong to a server that died. It does for each what
// ResolveInterrupted does at a restart — a send that was waiting for the
// provider is given back (a held message queued again, due at now, with
// its lane's job written by lane; a direct one failed as not sent), any
// other counts at its deadline and its message fails, delivery unknown —
// but leaves alone the sends of servers still running, which
// ResolveInterrupted cannot when several servers share the database. It
// returns how many it resolved. Safe to run on every server at once.
func (s *Store) ResolveExpiredSends(ctx context.Context, now, before time.Time, lane LaneJob) (int64, error) {
	before = utc(before)
	n, err := s.recover(ctx, recovery{now: now, lane: lane, countAt: gorm.Expr("deadline"),
		slots: func(db *gorm.DB) *gorm.DB { return db.Where("deadline < ?", before) }})
	return n, wrap(err, "resolve expired sends")
}
