package skuld

import (
	"time"

	"github.com/nornweave/nornweave/providers"
)

// Defaults of a Budget's fields (SEND_TIMEOUT, SEND_RETRY_DEADLINE).
const (
	DefaultSendTimeout   = 60 * time.Second
	DefaultRetryDeadline = 30 * time.Second
)

// Budget is the time a send may take. Every bound on a send — its throttle
// lease, each provider attempt, the SMTP connection's deadline, the drain
// at shutdown, how long another server may hold an Idempotency-Key — comes
// from Lease or Attempt here, so they cannot disagree.
type Budget struct {
	// SendTimeout bounds one provider attempt for a small message; a large
	// message gets longer (providers.TransferAllowance).
	SendTimeout time.Duration
	// RetryDeadline is how long after admission a retry may still start.
	RetryDeadline time.Duration
}

func (b Budget) withDefaults() Budget {
	if b.SendTimeout <= 0 {
		b.SendTimeout = DefaultSendTimeout
	}
	if b.RetryDeadline <= 0 {
		b.RetryDeadline = DefaultRetryDeadline
	}
	return b
}

// Attempt is the longest one provider attempt for a message of size bytes
// may take.
func (b Budget) Attempt(size int) time.Duration {
	b = b.withDefaults()
	return b.SendTimeout + providers.TransferAllowance(size)
}

// Lease is the longest a send of a message of size bytes may take from
// admission, every retry included: a retry starts no later than
// RetryDeadline, and runs for at most one Attempt. The throttle assumes the
// worst of it for Retry-After, and a crash counts the send at its end.
func (b Budget) Lease(size int) time.Duration {
	b = b.withDefaults()
	return b.RetryDeadline + b.Attempt(size)
}
