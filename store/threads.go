package store

import "context"

// threadColumns selects a thread with its MessageCount, which is not a
// column but what the thread listings show.
const threadColumns = "threads.*, " +
	"(SELECT COUNT(*) FROM messages WHERE messages.thread_id = threads.id) AS message_count"

// Thread returns the thread with the given id, MessageCount filled, or
// ErrNotFound.
func (s *Store) Thread(ctx context.Context, id string) (*Thread, error) {
	if !isText(id) {
		return nil, notText("thread", id)
	}
	var t Thread
	err := s.db.WithContext(ctx).Select(threadColumns).Where("threads.id = ?", id).Take(&t).Error
	if err != nil {
		return nil, wrap(err, "thread %s", id)
	}
	return &t, nil
}

// Threads returns a page of an inbox's threads, most recent activity first,
// MessageCount filled. limit <= 0 means no limit. An unknown inbox has no
// threads; it is not an error here.
func (s *Store) Threads(ctx context.Context, inboxID string, limit, offset int) ([]Thread, error) {
	ts := []Thread{}
	if !isText(inboxID) {
		return ts, nil // matches nothing (see isText)
	}
	err := s.db.WithContext(ctx).Select(threadColumns).Where("threads.inbox_id = ?", inboxID).
		Order("threads.last_message_at DESC, threads.id DESC").
		Limit(noLimit(limit)).Offset(offset).Find(&ts).Error
	if err != nil {
		return nil, wrap(err, "list threads of inbox %s", inboxID)
	}
	return ts, nil
}
