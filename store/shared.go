package store

// ShareDatabase tells the Store that other servers write the same database
// (a shared throttle backend), so that what it would hold in memory may be
// out of date: Inbox then reads the database every time, and a send judged
// by InboxCopy's copy is recorded only if the copy is still true. Call it
// before the Store is used.
func (s *Store) ShareDatabase() {
	s.shared.Store(true)
	s.inboxes.mu.Lock()
	defer s.inboxes.mu.Unlock()
	s.inboxes.m = nil
}
