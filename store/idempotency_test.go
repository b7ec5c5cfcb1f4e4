package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Concurrent requests with one Idempotency-Key, each holder giving the key
// back at once, as a refused send does: no claim fails because the holder
// it collided with was gone by the time it looked (issue 15, item 8: the
// store's not-found reached clients as 404 on POST /v1/messages).
func TestClaimIdempotencyKeyRacingRelease(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		var (
			wg   sync.WaitGroup
			errs = make(chan error, 1)
		)
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				owner := fmt.Sprint("server-", g)
				for i := range 25 {
					k := &IdempotencyKey{Key: "order-42", RequestHash: "h", Owner: owner,
						MessageID: fmt.Sprint(owner, "-", i), CreatedAt: time.Now()}
					held, err := s.ClaimIdempotencyKey(ctx, k, time.Now().Add(-time.Hour))
					if err != nil {
						select {
						case errs <- err:
						default:
						}
						return
					}
					if held == nil {
						if err := s.ReleaseIdempotencyKey(ctx, k.Key, owner); err != nil {
							t.Error(err)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			t.Fatalf("a claim failed while holders came and went: %v", err)
		}
	})
}
