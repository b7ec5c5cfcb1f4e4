package store

import (
	"context"
	"errors"
	"testing"

	"github.com/nornweave/nornweave/internal/testdb"
)

func TestSingleServerRefusesASecondServer(t *testing.T) {
	ctx := context.Background()
	dsn := testdb.PostgresURL(t)
	open := func() *Store {
		s, err := Open(ctx, Options{Driver: "postgres", DSN: dsn})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	first, second := open(), open()
	lock, err := first.SingleServer(ctx)
	if err != nil {
		t.Fatalf("first server: %v", err)
	}
	if _, err := second.SingleServer(ctx); !errors.Is(err, ErrAnotherServer) {
		t.Fatalf("second server: got %v, want ErrAnotherServer", err)
	}
	if err := lock.Release(); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := lock.Release(); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	again, err := second.SingleServer(ctx)
	if err != nil {
		t.Fatalf("after the first released: %v", err)
	}
	again.Release()
}

func TestSingleServerOnSQLiteHoldsNothing(t *testing.T) {
	s := openStore(t, "sqlite")
	for range 2 {
		l, err := s.SingleServer(context.Background())
		if err != nil {
			t.Fatalf("SingleServer on SQLite: %v", err)
		}
		if err := l.Release(); err != nil {
			t.Fatal(err)
		}
	}
}
