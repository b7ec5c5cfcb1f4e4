package pgthrottle

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/nornweave/nornweave/skuld/throttle/throttledriver"
)

// NewDriver returns the driver alone, for the driver conformance suite.
func NewDriver(pool *pgxpool.Pool) throttledriver.Driver { return &driver{pool: pool} }

// Schema is schema.sql, for the test that applies it twice.
var Schema = schema
