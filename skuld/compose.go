package skuld

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld/render"
	"github.com/nornweave/nornweave/store"
)

// build prepares the rows for a send, rendering its Markdown; newThread is
// nil for a reply.
func (s *Sender) build(ctx context.Context, req SendRequest, inbox *store.Inbox, thread *store.Thread, parent *store.Message) (*store.Message, []store.Attachment, *store.Thread, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, nil, err
	}
	text, html := req.Body, req.HTML
	switch {
	case html == "":
		var err error
		if html, err = s.o.Renderer.Render(ctx, text); err != nil {
			return nil, nil, nil, err
		}
	case text == "":
		text = render.PlainText(html)
	}
	id := req.MessageID
	if id == "" {
		id = uuid.NewString()
	}
	m := &store.Message{
		ID: id, InboxID: inbox.ID, Direction: store.DirectionOutbound, Status: store.StatusSending,
		MessageIDHeader: "<" + id + "@" + domainOf(inbox.EmailAddress) + ">",
		Subject:         req.Subject, FromAddress: inbox.EmailAddress,
		ToAddresses: strs(req.To), CcAddresses: strs(req.Cc), BccAddresses: strs(req.Bcc),
		ReplyToAddresses: strs(req.ReplyTo), Text: text, HTML: html,
		References: store.StringList{}, Labels: append(store.StringList{}, req.Labels...), Metadata: store.JSONObject{},
	}
	if req.Metadata != nil {
		m.Metadata = req.Metadata
	}
	if parent != nil && parent.MessageIDHeader != "" {
		inReplyTo := parent.MessageIDHeader
		m.InReplyTo = &inReplyTo
		m.References = references(parent)
	}
	size := len(m.Text) + len(m.HTML)
	atts := make([]store.Attachment, 0, len(req.Attachments))
	for _, a := range req.Attachments {
		size += len(a.Content)
		// The content is kept as it is: the row shares the decoded bytes
		// that go out, no copy.
		sum := sha256.Sum256(a.Content)
		hash := hex.EncodeToString(sum[:])
		row := store.Attachment{ID: uuid.NewString(), MessageID: id, Filename: a.Filename,
			ContentType: a.ContentType, Disposition: "attachment", Size: len(a.Content),
			ContentHash: &hash, Content: a.Content}
		if a.Inline {
			cid := a.ContentID
			row.Disposition, row.ContentID = "inline", &cid
		}
		atts = append(atts, row)
	}
	m.Size = size

	var newThread *store.Thread
	if thread == nil {
		newThread = &store.Thread{ID: uuid.NewString(), InboxID: inbox.ID, Subject: req.Subject,
			ParticipantHash: participantHash(inbox.EmailAddress, req.To, req.Cc)}
		thread = newThread
	}
	m.ThreadID = thread.ID
	return m, atts, newThread, nil
}

// maxReferences bounds the References header of long threads; RFC 5322
// §3.6.4 allows trimming as long as the first and the parent stay.
const maxReferences = 20

func references(parent *store.Message) store.StringList {
	refs := append(slices.Clone(parent.References), parent.MessageIDHeader)
	if len(refs) > maxReferences {
		refs = append(refs[:1], refs[len(refs)-maxReferences+1:]...)
	}
	return refs
}

func providerMessage(m *store.Message, inbox *store.Inbox, req SendRequest) providers.Message {
	pm := providers.Message{
		MessageID: m.MessageIDHeader, Date: m.CreatedAt, From: inbox.EmailAddress, FromName: inbox.Name,
		To: req.To, Cc: req.Cc, Bcc: req.Bcc, ReplyTo: req.ReplyTo,
		Subject: m.Subject, Text: m.Text, HTML: m.HTML, References: m.References,
		Attachments: req.Attachments,
	}
	if m.InReplyTo != nil {
		pm.InReplyTo = *m.InReplyTo
	}
	return pm
}

// providerMessage is providerMessage with the envelope sender
// Options.ReturnPath gives m, if any.
func (s *Sender) providerMessage(m *store.Message, inbox *store.Inbox, req SendRequest) providers.Message {
	pm := providerMessage(m, inbox, req)
	if s.o.ReturnPath != nil {
		only := ""
		if pm.RecipientCount() == 1 {
			only = slices.Concat(pm.To, pm.Cc, pm.Bcc)[0].Key()
		}
		pm.ReturnPath = s.o.ReturnPath(m.ID, only)
	}
	return pm
}

// participantHash identifies a conversation's participants regardless of order.
func participantHash(from string, lists ...[]address.Address) string {
	all := []string{strings.ToLower(from)}
	for _, l := range lists {
		for _, a := range l {
			all = append(all, a.Key())
		}
	}
	slices.Sort(all)
	sum := sha256.Sum256([]byte(strings.Join(slices.Compact(all), ",")))
	return hex.EncodeToString(sum[:])
}

func domainOf(addr string) string {
	return addr[strings.LastIndex(addr, "@")+1:]
}

// strs is the stored form of canonical addresses: their header form, so the
// row shows exactly what the headers said.
func strs(l []address.Address) store.StringList {
	out := make(store.StringList, len(l))
	for i, a := range l {
		out[i] = a.String()
	}
	return out
}
