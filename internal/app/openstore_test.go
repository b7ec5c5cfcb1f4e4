package app

import (
	"context"
	"log/slog"
	"testing"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/internal/testkit/testdb"
)

// DATABASE_MAX_CONNECTIONS is the PostgreSQL pool of the store, the one
// River shares: a run of many servers is sized by it.
func TestOpenStoreSizesThePoolFromDatabaseMaxConnections(t *testing.T) {
	t.Parallel()
	cfg := config.Config{DBDriver: "postgres", DatabaseURL: testdb.PostgresURL(t), DatabaseMaxConnections: 3}
	st, err := OpenStore(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got := st.SQL().Stats().MaxOpenConnections; got != 3 {
		t.Errorf("pool of %d connections, want DATABASE_MAX_CONNECTIONS = 3", got)
	}
}
