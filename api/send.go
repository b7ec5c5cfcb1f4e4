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

// SendAnswer is Send's answer to a send that was not refused: the
// message's response, sent now or replayed for its Idempotency-Key. With
// an error, only its Inbox is set.
type SendAnswer struct {
	Status   int    // 201 sent (or failed), 202 held
	Body     []byte // the JSON response
	Replayed bool   // the answer of an earlier request with the same Idempotency-Key
	// Windows is what the rate-limit headers describe: the windows the
	// send's admission saw or, for an answer decided without the throttle
	// (a replay, a held message), the windows as they are. WindowsRead is
	// false when the throttle could not tell: no headers.
	Windows     throttle.Snapshot
	WindowsRead bool
	// Inbox is the inbox the send was judged by, nil if unknown. Send sets
	// it with an error too, for the windows of that answer.
	Inbox *store.Inbox
}

// postMessage is POST /v1/messages: decode, run the pipeline (Send),
// answer.
func (a *API) postMessage(c echo.Context) error {
	req, key, hash, err := a.decodeSend(c)
	if err != nil {
		a.CountRefusal(err)
		return a.answerSend(c, SendAnswer{}, err)
	}
	req.Async = a.respondAsync(c.Request().Header)
	ans, err := a.Send(c.Request().Context(), req, key, hash)
	a.CountRefusal(err)
	if err == nil && req.Async && req.ScheduledAt == nil && ans.Status == http.StatusAccepted {
		c.Response().Header().Set("Preference-Applied", "respond-async")
	}
	return a.answerSend(c, ans, err)
}

// respondAsync reads the request's preference (RFC 7240): respond-async
// asks for 202 queued as soon as the message is recorded, respond-sync for
// the answer after the send; neither, the server's default.
func (a *API) respondAsync(h http.Header) bool {
	async := a.RespondAsync
	for _, v := range h.Values("Prefer") {
		for _, pref := range strings.Split(v, ",") {
			name, _, _ := strings.Cut(pref, ";")
			name, _, _ = strings.Cut(name, "=")
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "respond-async":
				async = true
			case "respond-sync":
				async = false
			}
		}
	}
	return async
}

// decodeSend reads a send request: its Idempotency-Key, with the hash of
// the body a reuse of the key must match, and its body.
func (a *API) decodeSend(c echo.Context) (req skuld.SendRequest, key, hash string, err error) {
	if key, hash, err = a.readIdempotencyKey(c); err != nil {
		return req, "", "", err
	}
	obj, err := decodeBody(c.Request().Body)
	if err != nil {
		return req, "", "", err
	}
	at, queue := a.readHold(obj)
	if req, err = a.readSend(obj); err != nil {
		return req, "", "", err
	}
	req.ScheduledAt, req.QueueOnThrottle = at, queue
	return req, key, hash, nil
}

// answerSend writes the answer to POST /v1/messages, ans or err. Its
// rate-limit headers are set here, explicitly, before anything is
// written: the windows of ans, those of the refusal, or, for another
// error, read for the inbox it names (the global windows alone if none).
func (a *API) answerSend(c echo.Context, ans SendAnswer, err error) error {
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
		if snap, ok := a.readWindows(c.Request().Context(), ans.Inbox); ok {
			a.setRateLimitHeaders(h, snap, nil)
		}
		return err
	}
	if ans.WindowsRead {
		a.setRateLimitHeaders(h, ans.Windows, nil)
	}
	if ans.Replayed {
		h.Set("Idempotent-Replayed", "true") // counted by the metrics middleware
	}
	return c.JSONBlob(ans.Status, ans.Body)
}

// Send runs one decoded send request through the pipeline, under its
// Idempotency-Key if key is not "" (hash is the request's fingerprint for
// the key): what POST /v1/messages does after decoding, and what MCP's
// send tools call. The sending inbox is read once, here: a request for an
// inbox that does not exist is 404 before its key is looked at, a replay's
// windows are that inbox's, and the pipeline judges by it.
func (a *API) Send(ctx context.Context, req skuld.SendRequest, key, hash string) (SendAnswer, error) {
	in, err := a.Store.InboxCopy(ctx, req.InboxID)
	if req.Inbox, err = found(in, err, req.InboxID); err != nil {
		return SendAnswer{}, err
	}
	var ans SendAnswer
	if key != "" {
		ans, err = a.onceUnderKey(ctx, req, key, hash)
	} else {
		ans, err = a.runPipeline(ctx, req)
	}
	if err == nil && !ans.WindowsRead {
		ans.Windows, ans.WindowsRead = a.readWindows(ctx, ans.Inbox)
	}
	return ans, err
}

// runPipeline runs a checked request through the pipeline
// (skuld.Sender.Send: admit, deliver) and makes its answer.
func (a *API) runPipeline(ctx context.Context, req skuld.SendRequest) (SendAnswer, error) {
	res, err := a.Sender.Send(ctx, req)
	if err != nil {
		return SendAnswer{Inbox: res.Inbox}, err
	}
	body, err := encodeJSON(responseOf(res.Message))
	if err != nil {
		return SendAnswer{Inbox: res.Inbox}, err
	}
	return answerOf(res, body), nil
}

// answerOf is the answer to a send the pipeline recorded, with its body. A
// held message's answer is not the send's admission: its windows are left
// to be read, like a replay's.
func answerOf(res skuld.Result, body []byte) SendAnswer {
	return SendAnswer{Status: statusOf(res.Message), Body: body, Windows: res.Windows,
		WindowsRead: !store.Held(res.Message.Status), Inbox: res.Inbox}
}

// responseOf is the JSON response of a send.
func responseOf(m *store.Message) sendResponse {
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
