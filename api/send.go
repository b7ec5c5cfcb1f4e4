package api

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/store"
)

// maxRecipients caps to+cc+bcc of one message, as the large providers do
// (SES and Resend: 50); a larger fan-out is a mailing, not a message.
const maxRecipients = 50

// maxSubjectLen is RFC 5322's line limit.
const maxSubjectLen = 998

// sendAnswer is what POST /v1/messages answers for a request that was not
// refused: the message's response, sent now or replayed for its
// Idempotency-Key.
type sendAnswer struct {
	status   int
	body     []byte // the JSON response
	replayed bool
	// windows is what the rate-limit headers describe; read is false when
	// the answer was decided without the throttle (a replay).
	windows throttle.Snapshot
	read    bool
}

// SendAnswer is what a send that was not refused answers (see Send).
type SendAnswer struct {
	Status   int
	Body     []byte // the JSON response of POST /v1/messages
	Replayed bool   // an answer replayed for its idempotency key
	// Windows are what the answer's rate-limit headers describe;
	// WindowsRead is false when the answer was decided without the
	// throttle (a replay, a held message): read them then (SendWindows).
	Windows     throttle.Snapshot
	WindowsRead bool
	// Inbox is the sending inbox, once it was found.
	Inbox *store.Inbox
}

// Send sends req from its inbox, under the idempotency key key if it has
// one (hash: the request's, which a reuse of the key must match): what
// POST /v1/messages and the send_email tool do once they have read their
// request.
func (a *API) Send(ctx context.Context, req skuld.SendRequest, key, hash string) (SendAnswer, error) {
	var inbox *store.Inbox
	ans, err := a.sendFrom(ctx, req, key, hash, &inbox)
	return SendAnswer{Status: ans.status, Body: ans.body, Replayed: ans.replayed, Windows: ans.windows,
		WindowsRead: ans.read, Inbox: inbox}, err
}

// sendMessage is POST /v1/messages. The answer's rate-limit headers are
// built here, explicitly, before anything is written: from the windows the
// send's admission saw, from the refusal, or read for an answer decided
// without the throttle.
func (a *API) sendMessage(c echo.Context) error {
	ctx := c.Request().Context()
	var inbox *store.Inbox // once known, its windows are in the headers
	ans, err := a.postMessage(c, &inbox)
	h := c.Response().Header()
	var (
		rl   *throttle.RateLimitedError
		down *throttle.UnavailableError
	)
	switch {
	case errors.As(err, &rl):
		a.setRateLimitHeaders(h, rl.Snapshot, rl)
		return err
	case errors.As(err, &down), errors.Is(err, skuld.ErrShuttingDown):
		return err // decided without the throttle's windows
	case err != nil:
		if snap, ok := a.readWindows(ctx, a.asItIs(ctx, inbox)); ok {
			a.setRateLimitHeaders(h, snap, nil)
		}
		return err
	}
	if !ans.read {
		ans.windows, ans.read = a.readWindows(ctx, a.asItIs(ctx, inbox))
	}
	if ans.read {
		a.setRateLimitHeaders(h, ans.windows, nil)
	}
	if ans.replayed {
		h.Set("Idempotent-Replayed", "true") // counted by the metrics middleware
	}
	return c.JSONBlob(ans.status, ans.body)
}

// asItIs is the sending inbox as it is now, for the windows of an answer the
// send's admission did not decide: the copy the send was given may be out
// of date on a shared database. Nil (the global windows only) if it is
// gone or unknown.
func (a *API) asItIs(ctx context.Context, copy *store.Inbox) *store.Inbox {
	if copy == nil {
		return nil
	}
	in, err := a.Store.Inbox(ctx, copy.ID)
	if err != nil {
		return nil
	}
	return in
}

// postMessage reads, checks and runs one send request; inbox is set once
// the sending inbox is known.
func (a *API) postMessage(c echo.Context, inbox **store.Inbox) (sendAnswer, error) {
	key, hash, err := a.readIdempotencyKey(c)
	if err != nil {
		return sendAnswer{}, err
	}
	obj, err := decodeBody(c.Request().Body)
	if err != nil {
		return sendAnswer{}, err
	}
	at, queue := a.readHold(obj)
	req, err := a.readSend(obj)
	if err != nil {
		return sendAnswer{}, err
	}
	req.ScheduledAt, req.QueueOnThrottle = at, queue
	return a.sendFrom(c.Request().Context(), req, key, hash, inbox)
}

// sendFrom loads the sending inbox (*inbox, once known) and sends req from
// it: what POST /v1/messages and the send_email tool both do once they have
// read their request. The inbox is a copy (store.InboxCopy), which the
// pipeline checks where it decides by it.
func (a *API) sendFrom(ctx context.Context, req skuld.SendRequest, key, hash string, inbox **store.Inbox) (sendAnswer, error) {
	in, err := a.Store.InboxCopy(ctx, req.InboxID)
	if *inbox, err = found(in, err, req.InboxID); err != nil {
		return sendAnswer{}, err
	}
	req.Inbox = *inbox
	return a.send(ctx, req, key, hash)
}

// send runs a checked request through the pipeline, under its
// Idempotency-Key if it has one: the one path every send takes.
func (a *API) send(ctx context.Context, req skuld.SendRequest, key, hash string) (sendAnswer, error) {
	if key != "" {
		return a.sendIdempotent(ctx, key, hash, req)
	}
	res, err := a.Sender.Send(ctx, req)
	if err != nil {
		return sendAnswer{}, err
	}
	body, err := encodeJSON(sendResponseOf(res.Message))
	if err != nil {
		return sendAnswer{}, err
	}
	// A held message's answer is not the send's admission: its headers
	// are read (read false), like a replay's.
	return sendAnswer{status: sendStatus(res.Message), body: body, windows: res.Windows,
		read: !store.Held(res.Message.Status)}, nil
}

func sendResponseOf(m *store.Message) sendResponse {
	return sendResponse{ID: m.ID, ThreadID: m.ThreadID, ProviderMessageID: m.ProviderMessageID,
		Status: m.Status, Error: m.Error, ScheduledAt: optTime(m.ScheduledAt), NextAttemptAt: optTime(m.NextAttemptAt)}
}

// readSend reads and validates a send request from obj, the JSON body or
// the send_email tool's arguments: schema problems are one 422 listing all
// of them; then attachment content is decoded (400 on bad base64, 413/422
// on the limits).
func (a *API) readSend(obj object) (skuld.SendRequest, error) {
	obj.forbidExtra("inbox_id", "to", "cc", "bcc", "reply_to", "subject", "body", "html",
		"reply_to_thread_id", "attachments", "labels", "metadata")
	req := skuld.SendRequest{
		InboxID:         obj.str("inbox_id", true, 1, 0),
		To:              obj.addresses("to", true, 1),
		Cc:              obj.addresses("cc", false, 0),
		Bcc:             obj.addresses("bcc", false, 0),
		ReplyTo:         obj.addresses("reply_to", false, 0),
		Subject:         obj.str("subject", true, 1, maxSubjectLen),
		Body:            obj.str("body", false, 0, 0),
		HTML:            obj.str("html", false, 0, 0),
		ReplyToThreadID: obj.str("reply_to_thread_id", false, 0, 0),
		Labels:          obj.labels("labels"),
		Metadata:        obj.metadata("metadata"),
	}
	// With html alone, the text part is derived from it (render.PlainText).
	if _, given := obj.present("body"); !given && req.HTML == "" {
		obj.add("body", "Field required unless html is given", "missing")
	}
	if err := a.checkBodySizes(req.Body, req.HTML); err != nil {
		return req, err
	}
	if address.CheckText(req.Subject) != nil {
		obj.add("subject", "Subject must not contain CR or LF, or another control character "+controlChars, "value_error")
	}
	req.To, req.Cc, req.Bcc = dedupRecipients(req.To, req.Cc, req.Bcc)
	req.ReplyTo, _, _ = dedupRecipients(req.ReplyTo, nil, nil)
	if n := len(req.To) + len(req.Cc) + len(req.Bcc); n > maxRecipients {
		obj.add("to", fmt.Sprintf("Too many recipients: %d (at most %d across to, cc and bcc)", n, maxRecipients), "value_error")
	}
	specs := a.attachmentSpecs(obj)
	if err := obj.err(); err != nil {
		return req, err
	}
	var err error
	req.Attachments, err = a.decodeAttachments(specs)
	return req, err
}

// dedupRecipients keeps the first occurrence of each mailbox across to, cc
// and bcc (compared case-insensitively on the canonical addr-spec): the same
// person listed three times is one recipient, in the first list naming them.
func dedupRecipients(to, cc, bcc []address.Address) (_, _, _ []address.Address) {
	seen := make(map[string]bool, len(to)+len(cc)+len(bcc))
	keep := func(l []address.Address) []address.Address {
		out := l[:0:0]
		for _, a := range l {
			if k := a.Key(); !seen[k] {
				seen[k] = true
				out = append(out, a)
			}
		}
		return out
	}
	return keep(to), keep(cc), keep(bcc)
}

type attachmentSpec struct {
	filename, contentType, content, disposition, contentID string
}

func (a *API) attachmentSpecs(obj object) []attachmentSpec {
	items := obj.objects("attachments")
	if len(items) > a.AttachmentMaxCount {
		obj.add("attachments", fmt.Sprintf("Too many attachments: %d (ATTACHMENT_MAX_COUNT is %d)",
			len(items), a.AttachmentMaxCount), "too_long")
		return nil
	}
	specs := make([]attachmentSpec, 0, len(items))
	for _, it := range items {
		it.forbidExtra("filename", "content_type", "content_base64", "disposition", "content_id")
		s := attachmentSpec{
			filename:    it.str("filename", true, 1, 255),
			contentType: it.str("content_type", true, 1, 255),
			content:     it.str("content_base64", true, 0, 0),
			disposition: it.str("disposition", false, 0, 0),
			contentID:   it.str("content_id", false, 0, 255),
		}
		if s.disposition == "" {
			s.disposition = "attachment"
		}
		switch {
		case address.CheckText(s.filename) != nil:
			it.add("filename", "Filename must not contain CR, LF, NUL or another control character "+controlChars, "value_error")
		case s.disposition != "attachment" && s.disposition != "inline":
			it.add("disposition", "Input should be 'attachment' or 'inline'", "literal_error")
		case s.disposition == "inline" && s.contentID == "":
			it.add("content_id", "content_id is required for inline attachments", "missing")
		case s.contentID != "" && !validContentID(s.contentID):
			it.add("content_id", "content_id must be ASCII letters, digits, "+contentIDPunct+" and at most one @", "value_error")
		}
		if s.contentType != "" && !safeContentType(s.contentType) {
			it.add("content_type", "Invalid content type: "+s.contentType+
				" (a plain type/subtype, no parameters; multipart and message types are not accepted)", "value_error")
		}
		specs = append(specs, s)
	}
	return specs
}

func (a *API) decodeAttachments(specs []attachmentSpec) ([]providers.Attachment, error) {
	out := make([]providers.Attachment, 0, len(specs))
	var total int64
	for i, s := range specs {
		clean := strings.Map(func(r rune) rune {
			if r == '\r' || r == '\n' || r == ' ' || r == '\t' {
				return -1
			}
			return r
		}, s.content)
		if int64(base64.StdEncoding.DecodedLen(len(clean))) > a.AttachmentMaxSize+2 {
			return nil, tooLarge(i, "ATTACHMENT_MAX_SIZE_MB", a.AttachmentMaxSize)
		}
		content, err := base64.StdEncoding.DecodeString(clean)
		if err != nil {
			return nil, newError(http.StatusBadRequest, "invalid_base64",
				fmt.Sprintf("Invalid base64 content in attachment %d: %v", i, err))
		}
		if len(content) == 0 {
			return nil, newError(http.StatusUnprocessableEntity, "empty_attachment",
				fmt.Sprintf("Attachment %d has empty content", i))
		}
		if int64(len(content)) > a.AttachmentMaxSize {
			return nil, tooLarge(i, "ATTACHMENT_MAX_SIZE_MB", a.AttachmentMaxSize)
		}
		if total += int64(len(content)); total > a.AttachmentMaxTotalSize {
			return nil, newError(http.StatusRequestEntityTooLarge, "attachments_too_large",
				fmt.Sprintf("Attachments total more than ATTACHMENT_MAX_TOTAL_SIZE_MB (%d MB)", a.AttachmentMaxTotalSize>>20))
		}
		out = append(out, providers.Attachment{Filename: s.filename, ContentType: s.contentType,
			Content: content, Inline: s.disposition == "inline", ContentID: s.contentID})
	}
	return out, nil
}

func tooLarge(i int, variable string, limit int64) error {
	return newError(http.StatusRequestEntityTooLarge, "attachment_too_large",
		fmt.Sprintf("Attachment %d is larger than %s (%d MB)", i, variable, limit>>20))
}

// controlChars completes the messages of address.CheckText's refusals.
const controlChars = "(VT, ESC, DEL, NEL, U+2028, U+2029, bidirectional overrides, ...)"

// contentIDPunct is the punctuation of RFC 5322 atext, plus the dot.
const contentIDPunct = "!#$%&'*+-/=?^_`{|}~."

// validContentID accepts a Content-ID of atom characters (dot-atom text,
// with one "@" as in a msg-id): nothing to quote, nothing to break a header.
func validContentID(s string) bool {
	if strings.Count(s, "@") > 1 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '@' ||
			strings.IndexByte(contentIDPunct, c) >= 0) {
			return false
		}
	}
	return true
}

// safeTopTypes are the media types an attachment may declare. multipart and
// message would let a client smuggle its own MIME structure (message/rfc822
// with a forged inner message) into ours.
var safeTopTypes = map[string]bool{"application": true, "audio": true, "font": true,
	"image": true, "model": true, "text": true, "video": true}

// safeContentType accepts exactly "type/subtype" (RFC 6838 token
// characters, no parameters, no spaces) with a type from safeTopTypes.
func safeContentType(s string) bool {
	top, sub, ok := strings.Cut(s, "/")
	if !ok || !safeTopTypes[strings.ToLower(top)] || sub == "" || len(s) > 255 {
		return false
	}
	for i := 0; i < len(sub); i++ {
		c := sub[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			strings.IndexByte("!#$&-^_.+", c) >= 0) {
			return false
		}
	}
	return true
}
