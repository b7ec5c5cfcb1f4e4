package skuld

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nornweave/nornweave/store"
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

// SuppressedError is a send refused because recipients (to, cc or bcc) are
// on the suppression list: it took no slot in any window.
type SuppressedError struct {
	Suppressed []store.Suppression // in the request's order, one per address
}

// SuppressedCode is the code a suppressed send is refused with, and the
// prefix of the error a held message records when it fails so.
const SuppressedCode = "recipient_suppressed"

// TooManyRecipientsCode is the code a send whose cost is above a window's
// limit (a *throttle.TooLargeError) is refused with, and the prefix of the
// error of a held message that fails so.
const TooManyRecipientsCode = "too_many_recipients"

func (e *SuppressedError) Error() string {
	parts := make([]string, len(e.Suppressed))
	for i, sp := range e.Suppressed {
		parts[i] = sp.Email + " (" + sp.Reason + ")"
	}
	return "Recipient(s) on the suppression list: " + strings.Join(parts, ", ")
}
