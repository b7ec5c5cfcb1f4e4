package store

import "context"

// ShareDatabase tells the Store that other servers write the same database
// (a shared throttle backend), so that what it holds in memory may be out
// of date: a PATCH of an inbox's limits on one server must hold on the next
// send through any other. version reports the version of the inboxes,
// which moves with every change (skuld.Throttle.InboxVersion). Inbox then
// reads the database every time; CachedInbox, which a send uses, serves
// copies stamped with the version they were read at, which the shared
// throttle checks at admission. Call it before the Store is used.
func (s *Store) ShareDatabase(version func(context.Context) (string, error)) {
	s.inboxes.mu.Lock()
	defer s.inboxes.mu.Unlock()
	s.inboxVersion = version
	s.inboxes.m = nil
}
