package bounce

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// pass is one poll on a connected client.
func (p *Poller) pass(ctx context.Context, c *imapclient.Client) (Stats, error) {
	cfg := p.o.IMAP
	var st Stats
	if err := c.Login(cfg.Username, cfg.Password).Wait(); err != nil {
		return st, fmt.Errorf("bounce: log in to %s as %q: %w", cfg.Addr, cfg.Username, err)
	}
	sel, err := c.Select(cfg.Mailbox, nil).Wait()
	if err != nil {
		return st, fmt.Errorf("bounce: select %q: %w", cfg.Mailbox, err)
	}
	if sel.UIDValidity != p.uidValidity {
		// Another mailbox behind the same name: UIDs mean other messages.
		p.uidValidity, p.ignored = sel.UIDValidity, map[imap.UID]bool{}
	}
	found, err := c.UIDSearch(&imap.SearchCriteria{NotFlag: []imap.Flag{imap.FlagDeleted}}, nil).Wait()
	if err != nil {
		return st, fmt.Errorf("bounce: search %q: %w", cfg.Mailbox, err)
	}
	uids := found.AllUIDs()
	st.Messages = len(uids)
	p.forgetGone(uids)

	var todo []imap.UID
	for _, uid := range uids {
		if !p.ignored[uid] && len(todo) < p.o.MaxPerPass {
			todo = append(todo, uid)
		}
	}
	if len(todo) == 0 {
		return st, nil
	}
	small, err := p.small(ctx, c, todo, &st)
	if err != nil {
		return st, err
	}
	matched, err := p.read(ctx, c, small, &st)
	if err != nil {
		return st, err
	}

	var (
		done            imap.UIDSet
		handled, events int
		failure         error
	)
	for _, m := range matched {
		if err := p.o.Handle(ctx, m.bounces); err != nil {
			st.Failed++
			p.log.WarnContext(ctx, "bounce not handled", slog.Any("error", err), slog.Uint64("uid", uint64(m.uid)),
				slog.String("message_id", m.bounces[0].MessageID))
			failure = cmp.Or(failure, fmt.Errorf("bounce: handle message uid %d: %w", m.uid, err))
			continue
		}
		done.AddNum(m.uid)
		handled++
		events += len(m.bounces)
	}
	if handled > 0 {
		if err := p.move(c, done); err != nil {
			// Handled but still in the mailbox: read and handled again on
			// the next pass, which the event IDs make harmless.
			st.Failed += handled
			return st, cmp.Or(failure, err)
		}
		st.Handled, st.Events = handled, events
	}
	return st, failure
}

// small keeps the UIDs of messages no larger than MaxDSNSize, by their
// RFC822.SIZE: a larger one is not downloaded at all.
func (p *Poller) small(ctx context.Context, c *imapclient.Client, uids []imap.UID, st *Stats) ([]imap.UID, error) {
	msgs, err := c.Fetch(imap.UIDSetNum(uids...), &imap.FetchOptions{UID: true, RFC822Size: true}).Collect()
	if err != nil {
		return nil, fmt.Errorf("bounce: fetch sizes: %w", err)
	}
	var out []imap.UID
	for _, m := range msgs {
		if m.UID == 0 {
			continue
		}
		if m.RFC822Size > MaxDSNSize {
			p.ignore(ctx, m.UID, st, ErrTooLarge)
			continue
		}
		out = append(out, m.UID)
	}
	return out, nil
}

type attributed struct {
	uid     imap.UID
	bounces []Bounce
}

// read fetches each message's body with BODY.PEEK[] (no \Seen), one at a
// time as the server streams them, and attributes it; only the events are
// kept, never more than one body at once.
func (p *Poller) read(ctx context.Context, c *imapclient.Client, uids []imap.UID, st *Stats) ([]attributed, error) {
	if len(uids) == 0 {
		return nil, nil
	}
	section := &imap.FetchItemBodySection{Peek: true}
	cmd := c.Fetch(imap.UIDSetNum(uids...), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{section}})
	defer cmd.Close()
	var out []attributed
	for msg := cmd.Next(); msg != nil; msg = cmd.Next() {
		var (
			uid  imap.UID
			body []byte
			err  error
		)
		for item := msg.Next(); item != nil; item = msg.Next() {
			switch item := item.(type) {
			case imapclient.FetchItemDataUID:
				uid = item.UID
			case imapclient.FetchItemDataBodySection:
				if item.Literal == nil {
					continue
				}
				if item.Literal.Size() > MaxDSNSize {
					err = ErrTooLarge // grown since its size was fetched
					continue
				}
				body, err = io.ReadAll(io.LimitReader(item.Literal, MaxDSNSize+1))
			}
		}
		if uid == 0 {
			continue
		}
		if err != nil && !errors.Is(err, ErrTooLarge) {
			return nil, fmt.Errorf("bounce: fetch message uid %d: %w", uid, err)
		}
		st.Read++
		if err == nil {
			var bounces []Bounce
			bounces, err = p.o.VERP.Attribute(body, p.o.Now())
			if err == nil {
				out = append(out, attributed{uid: uid, bounces: bounces})
				continue
			}
		}
		p.ignore(ctx, uid, st, err)
	}
	if err := cmd.Close(); err != nil {
		return nil, fmt.Errorf("bounce: fetch messages: %w", err)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return out, nil
}

// ignore remembers uid as not ours, and says why at a level that fits:
// a forged token is worth a look, an auto-reply is not.
func (p *Poller) ignore(ctx context.Context, uid imap.UID, st *Stats, why error) {
	st.Ignored++
	p.ignored[uid] = true
	level := slog.LevelDebug
	if errors.Is(why, ErrForged) {
		level = slog.LevelInfo
	}
	p.log.Log(ctx, level, "bounce mailbox message left alone",
		slog.Uint64("uid", uint64(uid)), slog.Any("error", why))
}

// forgetGone drops the remembered UIDs no longer in the mailbox (someone
// moved or deleted them), so the memory is bounded by the mailbox.
func (p *Poller) forgetGone(uids []imap.UID) {
	if len(p.ignored) == 0 {
		return
	}
	present := make(map[imap.UID]bool, len(uids))
	for _, u := range uids {
		present[u] = true
	}
	for u := range p.ignored {
		if !present[u] {
			delete(p.ignored, u)
		}
	}
}

// move moves uids to the processed mailbox, creating it if missing. Without
// MOVE it copies, flags \Deleted and expunges those UIDs only (UIDPLUS); a
// server with neither gets the copy and the flag but no EXPUNGE, which
// would also remove whatever else someone flagged \Deleted. The search
// skips \Deleted messages, so those are not read again.
func (p *Poller) move(c *imapclient.Client, uids imap.UIDSet) error {
	dest := p.o.IMAP.Processed
	if err := ensureMailbox(c, dest); err != nil {
		return err
	}
	if c.Caps().Has(imap.CapMove) {
		if _, err := c.Move(uids, dest).Wait(); err != nil {
			return fmt.Errorf("bounce: move to %q: %w", dest, err)
		}
		return nil
	}
	if _, err := c.Copy(uids, dest).Wait(); err != nil {
		return fmt.Errorf("bounce: copy to %q: %w", dest, err)
	}
	store := &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagDeleted}}
	if err := c.Store(uids, store, nil).Close(); err != nil {
		return fmt.Errorf("bounce: flag moved messages deleted: %w", err)
	}
	if !c.Caps().Has(imap.CapUIDPlus) {
		p.log.Warn("bounce mailbox server has neither MOVE nor UIDPLUS: handled messages are flagged \\Deleted, not expunged",
			slog.String("mailbox", p.o.IMAP.Mailbox))
		return nil
	}
	if err := c.UIDExpunge(uids).Close(); err != nil {
		return fmt.Errorf("bounce: expunge moved messages: %w", err)
	}
	return nil
}

// ensureMailbox creates name unless LIST finds it.
func ensureMailbox(c *imapclient.Client, name string) error {
	found, err := c.List("", name, nil).Collect()
	if err != nil {
		return fmt.Errorf("bounce: list %q: %w", name, err)
	}
	if len(found) > 0 {
		return nil
	}
	if err := c.Create(name, nil).Wait(); err != nil {
		return fmt.Errorf("bounce: create %q: %w", name, err)
	}
	return nil
}
