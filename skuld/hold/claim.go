package hold

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/store"
)

// request reads held message m's request (its recipients), unless m,
// read at now, expired (QUEUE_MAX_AGE past its due time): then it fails m,
// and done reports that m needs nothing more (failed here or changed
// meanwhile). A recipient the domain filter now blocks fails it too, when
// it is admitted (claimAndSend).
func (d *dispatcher) request(ctx context.Context, m *store.Message, inbox *store.Inbox, now time.Time) (req skuld.SendRequest, done bool, err error) {
	if now.Sub(dueTime(m)) <= d.maxAge {
		req, err = heldRequest(m, inbox)
		return req, false, err
	}
	d.logger.WarnContext(ctx, "held message expired", slog.String("message_id", m.ID))
	_, err = d.store.FailHeld(ctx, m, store.ExpiredError)
	return req, true, ignoreNotHeld(err)
}

// attempt is what claimAndSend did with a held message; the zero attempt
// sent it (or failed it for good) and recorded that.
type attempt struct {
	refused     *throttle.RateLimitedError // the windows are full: nothing taken, nothing written
	unavailable bool                       // the throttle could not be asked
	done        bool                       // failed as blocked, or a cancel or reschedule came first: it is theirs
	retryAt     time.Time                  // the provider failed temporarily: held again until then
}

// step is the job's step after a that was not refused.
func (a attempt) step(now time.Time) step {
	switch {
	case a.unavailable:
		return step{snooze: unavailableSnooze}
	case !a.retryAt.IsZero():
		return step{snooze: max(a.retryAt.Sub(now), time.Millisecond)}
	}
	return step{}
}

// claimAndSend sends held message m now, if the domain filter allows its
// recipients and its windows have room: it claims m at the version it was
// read at (so a cancel or reschedule answered meanwhile wins), sends it,
// and records the outcome. A temporary provider failure puts it back with
// status held (scheduled or queued) and a next attempt, which the
// message's record is the one source of: the job waits until then.
func (d *dispatcher) claimAndSend(ctx context.Context, m *store.Message, inbox *store.Inbox, req skuld.SendRequest, held string) (attempt, error) {
	adm, err := d.sender.AdmitHeld(ctx, m, inbox, req)
	var (
		blocked    *skuld.BlockedError
		suppressed *skuld.SuppressedError
		tooLarge   *throttle.TooLargeError
		rl         *throttle.RateLimitedError
	)
	switch {
	case errors.As(err, &blocked):
		_, err := d.store.FailHeld(ctx, m, blocked.Error())
		return attempt{done: true}, ignoreNotHeld(err)
	case errors.As(err, &suppressed):
		// A recipient was suppressed (a bounce, a complaint) while the
		// message waited: it fails, with the code a send is refused with.
		_, err := d.store.FailHeld(ctx, m, skuld.SuppressedCode+": "+suppressed.Error())
		return attempt{done: true}, ignoreNotHeld(err)
	case errors.As(err, &tooLarge):
		// A limit was lowered below its recipients while it waited: no
		// wait would admit it.
		_, err := d.store.FailHeld(ctx, m, skuld.TooManyRecipientsCode+": "+tooLarge.Error())
		return attempt{done: true}, ignoreNotHeld(err)
	case errors.Is(err, skuld.ErrShuttingDown):
		return attempt{unavailable: true}, nil // taken up again by the next start
	case errors.As(err, &rl):
		return attempt{refused: rl}, nil
	case err != nil:
		d.logger.WarnContext(ctx, "throttle unavailable; held message waits", slog.String("message_id", m.ID), slog.Any("error", err))
		return attempt{unavailable: true}, nil
	}
	defer adm.Done()
	// The content is read once the send is admitted: a refusal costs none.
	// A message whose size is its bodies' has none to read.
	if m.Size > len(m.Text)+len(m.HTML) {
		if req.Attachments, err = d.attachments(ctx, m.ID); err != nil {
			adm.Release(ctx)
			return attempt{}, err
		}
	}
	ctx = context.WithoutCancel(ctx) // from the claim on, the send finishes and is recorded
	// Claimed only once the provider has a connection for it, just before
	// its bytes go: a server that dies while the message waits for one has
	// claimed nothing, and the message's job, rescued, sends it.
	var (
		claimed  bool
		claimErr error
		at       time.Time
	)
	claim := func(slot *store.SendSlot) error {
		if !claimed {
			if claimErr = d.store.ClaimHeld(ctx, m, slot); claimErr != nil {
				return claimErr
			}
			claimed, at = true, slot.ReservedAt
		}
		return nil
	}
	providerID, sendErr := adm.Deliver(ctx, req, claim)
	switch {
	case errors.Is(claimErr, store.ErrNotHeld) || errors.Is(claimErr, store.ErrNotFound):
		adm.Release(ctx)
		return attempt{done: true}, nil // canceled, rescheduled or gone meanwhile: it wins
	case claimErr != nil:
		adm.Release(ctx)
		return attempt{}, claimErr
	case !claimed:
		// The provider never had a connection for it: nothing went,
		// nothing was written. It stays held as it was.
		adm.Release(ctx)
		d.logger.WarnContext(ctx, "provider busy; held message waits", slog.String("message_id", m.ID), slog.Any("error", sendErr))
		return attempt{unavailable: true}, nil
	}
	if sendErr != nil && skuld.Temporary(sendErr) && d.clock.Now().Sub(dueTime(m)) < d.maxAge {
		// Not taken: held again as it was, and tried again at next. Past
		// QUEUE_MAX_AGE from its due time, that attempt finds it expired.
		adm.Release(ctx)
		next := retryTime(m, d.clock.Now())
		d.logger.InfoContext(ctx, "provider failed temporarily; held message retried later", slog.String("message_id", m.ID),
			slog.String("cause", providers.Cause(sendErr)), slog.Time("next_attempt_at", next))
		if err := d.store.FinishHeld(ctx, m.ID, store.Outcome{Status: held, NextAttemptAt: &next}); err != nil {
			return attempt{}, err
		}
		return attempt{retryAt: next}, nil
	}
	out := adm.Conclude(ctx, providerID, sendErr)
	if sendErr != nil && skuld.Temporary(sendErr) && out.Status == store.StatusFailed && out.Error != nil {
		// Deferred once more after QUEUE_MAX_AGE ran out during the
		// attempt: it fails because it expired, which its error says first,
		// as the janitor's does.
		msg := store.ExpiredError + "; the last attempt: " + *out.Error
		out.Error = &msg
	}
	if err := d.store.FinishHeld(ctx, m.ID, out); err != nil {
		// As for a direct send: the row stays "sending", resolved by the
		// recovery of sends left in flight.
		d.logger.ErrorContext(ctx, "record held send outcome", slog.String("message_id", m.ID), slog.Any("error", err))
		return attempt{}, err
	}
	if d.observer != nil && m.ScheduledAt != nil {
		d.observer.Dispatched(at.Sub(*m.ScheduledAt))
	}
	return attempt{}, nil
}

// retryTime is when a held message whose provider failed temporarily at
// now is tried again: after half the time it has waited since it became
// due, at least a second and at most an hour, so that a provider down for
// a while is asked ever less often (as River's backoff would, from the
// message's own record rather than a job's attempts).
func retryTime(m *store.Message, now time.Time) time.Time {
	return now.Add(min(max(now.Sub(dueTime(m))/2, time.Second), time.Hour))
}

// Observer is told the lateness of each held message sent: the time it
// was sent less the time it was scheduled for.
type Observer interface {
	Dispatched(lateness time.Duration)
}

// dueTime is when a held message became due: its scheduled time, or its
// acceptance for one queued at once. A lane goes in this order.
func dueTime(m *store.Message) time.Time {
	if m.ScheduledAt != nil {
		return *m.ScheduledAt
	}
	return m.CreatedAt
}

// ignoreNotHeld drops the error of a change that lost to a cancel or a
// reschedule: the message is theirs.
func ignoreNotHeld(err error) error {
	if errors.Is(err, store.ErrNotHeld) || errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// heldRequest is the request a held message was accepted from, as far as
// dispatch needs it: its recipients, parsed again from their stored
// canonical form for the domain filter and the envelope.
func heldRequest(m *store.Message, inbox *store.Inbox) (skuld.SendRequest, error) {
	req := skuld.SendRequest{MessageID: m.ID, InboxID: m.InboxID, Inbox: inbox, Subject: m.Subject}
	for _, l := range []struct {
		dst *[]address.Address
		src store.StringList
	}{{&req.To, m.ToAddresses}, {&req.Cc, m.CcAddresses}, {&req.Bcc, m.BccAddresses}, {&req.ReplyTo, m.ReplyToAddresses}} {
		for _, raw := range l.src {
			a, err := address.Parse(raw)
			if err != nil {
				return req, fmt.Errorf("hold: held message %s: stored address: %w", m.ID, err)
			}
			*l.dst = append(*l.dst, a)
		}
	}
	return req, nil
}

// attachments reads a held message's attachments with their content.
func (d *dispatcher) attachments(ctx context.Context, id string) ([]providers.Attachment, error) {
	rows, err := d.store.Attachments(ctx, store.AttachmentFilter{MessageID: id})
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	out := make([]providers.Attachment, len(rows))
	for i, r := range rows {
		content, err := d.store.AttachmentContent(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		out[i] = providers.Attachment{Filename: r.Filename, ContentType: r.ContentType, Content: content,
			Inline: r.Disposition == "inline"}
		if r.ContentID != nil {
			out[i].ContentID = *r.ContentID
		}
	}
	return out, nil
}
