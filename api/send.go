package api

import (
	"encoding/base64"
	"fmt"
	"mime"
	"net/http"
	"net/mail"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld"
)

// maxRecipients caps to+cc+bcc of one message, as the large providers do
// (SES and Resend: 50); a larger fan-out is a mailing, not a message.
const maxRecipients = 50

// maxSubjectLen is RFC 5322's line limit.
const maxSubjectLen = 998

func (a *API) sendMessage(c echo.Context) error {
	// Whatever the answer, it describes the throttle as of the moment it is written.
	c.Response().Before(func() { a.setRateLimitHeaders(c) })
	req, err := a.bindSend(c)
	if err != nil {
		return err
	}
	m, err := a.Sender.Send(c.Request().Context(), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, sendResponse{ID: m.ID, ThreadID: m.ThreadID,
		ProviderMessageID: m.ProviderMessageID, Status: m.Status, Error: m.Error})
}

// bindSend reads and validates a send request: schema problems are one 422
// listing all of them; then attachment content is decoded (400 on bad
// base64, 413/422 on the limits).
func (a *API) bindSend(c echo.Context) (skuld.SendRequest, error) {
	obj, err := decodeBody(c.Request().Body)
	if err != nil {
		return skuld.SendRequest{}, err
	}
	req := skuld.SendRequest{
		InboxID:         obj.str("inbox_id", true, 1, 0),
		To:              obj.strList("to", true, 1),
		Cc:              obj.strList("cc", false, 0),
		Bcc:             obj.strList("bcc", false, 0),
		ReplyTo:         obj.strList("reply_to", false, 0),
		Subject:         obj.str("subject", true, 1, maxSubjectLen),
		Body:            obj.str("body", true, 0, 0),
		HTML:            obj.str("html", false, 0, 0),
		ReplyToThreadID: obj.str("reply_to_thread_id", false, 0, 0),
	}
	if err := a.checkBodySizes(req.Body, req.HTML); err != nil {
		return req, err
	}
	if strings.ContainsAny(req.Subject, "\r\n") {
		obj.add("subject", "Subject must not contain CR or LF", "value_error")
	}
	for _, field := range []struct {
		name  string
		addrs []string
	}{{"to", req.To}, {"cc", req.Cc}, {"bcc", req.Bcc}, {"reply_to", req.ReplyTo}} {
		for i, addr := range field.addrs {
			if !validAddress(addr) {
				obj.add([]any{field.name, i}, "Invalid email address: "+addr, "value_error")
			}
		}
	}
	if n := len(req.To) + len(req.Cc) + len(req.Bcc); n > maxRecipients {
		obj.add("to", fmt.Sprintf("Too many recipients: %d (at most %d across to, cc and bcc)", n, maxRecipients), "value_error")
	}
	specs := a.attachmentSpecs(obj)
	if err := obj.err(); err != nil {
		return req, err
	}
	req.Attachments, err = a.decodeAttachments(specs)
	return req, err
}

// validAddress accepts one RFC 5322 address (a display name is allowed)
// with no header-breaking characters.
func validAddress(s string) bool {
	if strings.ContainsAny(s, "\r\n") {
		return false
	}
	a, err := mail.ParseAddress(s)
	return err == nil && strings.Contains(a.Address, "@")
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
		case strings.ContainsAny(s.filename, "\r\n\x00"):
			it.add("filename", "Filename must not contain CR, LF or NUL", "value_error")
		case s.disposition != "attachment" && s.disposition != "inline":
			it.add("disposition", "Input should be 'attachment' or 'inline'", "literal_error")
		case s.disposition == "inline" && s.contentID == "":
			it.add("content_id", "content_id is required for inline attachments", "missing")
		case strings.ContainsAny(s.contentID, "\r\n<> "):
			it.add("content_id", "content_id must not contain CR, LF, spaces or angle brackets", "value_error")
		}
		if s.contentType != "" {
			if _, _, err := mime.ParseMediaType(s.contentType); err != nil {
				it.add("content_type", "Invalid content type: "+s.contentType, "value_error")
			}
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
