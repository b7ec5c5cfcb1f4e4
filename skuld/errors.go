package skuld

import (
	"errors"
	"fmt"
	"strings"
)

// ErrShuttingDown refuses a send that arrives after Shutdown began.
var ErrShuttingDown = errors.New("skuld: shutting down")

// NotFoundError is a missing inbox or thread named by a send request.
type NotFoundError struct {
	Kind string // "Inbox" or "Thread"
	ID   string
}

func (e *NotFoundError) Error() string { return fmt.Sprintf("%s %s not found", e.Kind, e.ID) }

// BlockedError is a send refused by the outbound domain policy.
type BlockedError struct {
	Domains []string // sorted, unique
}

func (e *BlockedError) Error() string {
	return "Recipient domain(s) blocked by outbound policy: " + strings.Join(e.Domains, ", ")
}
