package store

// ShareDatabase tells the Store that other servers write the same database
// (a shared throttle backend), so nothing it read may be served from
// memory: a PATCH of an inbox's limits on one server must hold on the next
// send through any other. It turns the inbox cache off; a send then reads
// its inbox by primary key. Call it before the Store is used.
func (s *Store) ShareDatabase() {
	s.inboxes.mu.Lock()
	defer s.inboxes.mu.Unlock()
	s.inboxes.off = true
	s.inboxes.m = nil
}
