package tests

import (
	"fmt"
	"time"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/internal/app"
)

// shortLease is what bounds a server's longest send (app.HeldRescueBound
// reads nothing else), so that held mail a killed server held is rescued
// in about two minutes: each as small as the configuration allows, but
// for SEND_TIMEOUT, which a send waiting for the one SMTP connection
// behind others to a slow relay spends too (a test's relay answers each
// message in 0.5 s, and its kill comes a few seconds in).
var shortLease = config.Config{SendTimeout: 10 * time.Second, SendRetryDeadline: time.Second,
	AttachmentMaxTotalSizeMB: 1, BodyMaxSizeMB: 1, HTMLMaxSizeMB: 1}

// oneConnection gives a server one SMTP connection: at most one message on
// the wire when it is killed.
const oneConnection = "SMTP_MAX_CONNECTIONS=1"

// rescueSlack is what a test allows past the bound: a process's start, and
// the rescued sends themselves to a local relay.
const rescueSlack = 10 * time.Second

// shortLeaseEnv is shortLease as a server's environment, with the default
// poll for held mail (these tests time it), and extra.
func shortLeaseEnv(extra ...string) []string {
	return append([]string{heldPoll, "SEND_TIMEOUT=" + shortLease.SendTimeout.String(),
		"SEND_RETRY_DEADLINE=" + shortLease.SendRetryDeadline.String(),
		fmt.Sprint("ATTACHMENT_MAX_TOTAL_SIZE_MB=", shortLease.AttachmentMaxTotalSizeMB),
		fmt.Sprint("BODY_MAX_SIZE_MB=", shortLease.BodyMaxSizeMB),
		fmt.Sprint("HTML_MAX_SIZE_MB=", shortLease.HTMLMaxSizeMB)}, extra...)
}

// rescueWait is how long a test waits for held mail a killed server held:
// the rescue bound with shortLease, and rescueSlack.
func rescueWait() time.Duration { return app.HeldRescueBound(shortLease) + rescueSlack }
