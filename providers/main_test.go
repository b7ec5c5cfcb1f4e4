package providers

import (
	"testing"

	"github.com/nornweave/nornweave/internal/testkit/dnstest"
)

// TestMain answers this package's name lookups from a DNS server on
// loopback that knows no name (see dnstest): the unknown-host cases meet a
// real DNS failure without a packet leaving the machine.
func TestMain(m *testing.M) { dnstest.Main(m) }
