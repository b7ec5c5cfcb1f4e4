package mcp

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/nornweave/nornweave/api"
)

// The attachment tools, by the Python server's names: list_attachments and
// get_attachment_content read what GET /v1/attachments and its content
// route serve; send_email_with_attachments is send_email with files (see
// toolSendEmail).

type listAttachmentsArgs struct {
	MessageID string `json:"message_id,omitempty" jsonschema:"list this message's attachments, in the order sent (give exactly one of message_id, thread_id and inbox_id)"`
	ThreadID  string `json:"thread_id,omitempty" jsonschema:"list the attachments of this conversation's messages, oldest first"`
	InboxID   string `json:"inbox_id,omitempty" jsonschema:"list the attachments this inbox sent, newest first"`
	Limit     int    `json:"limit,omitempty" jsonschema:"how many at most, 1 to 500 (default 100)"`
	Offset    int    `json:"offset,omitempty" jsonschema:"how many to skip (default 0)"`
}

func (s *Server) toolListAttachments(ctx context.Context, args api.Args) (toolList[api.AttachmentResponse], error) {
	args.ForbidExtra("message_id", "thread_id", "inbox_id", "limit", "offset")
	q := api.AttachmentQuery{MessageID: args.String("message_id", false, 0, 0), ThreadID: args.String("thread_id", false, 0, 0),
		InboxID: args.String("inbox_id", false, 0, 0),
		Limit:   args.Int("limit", api.DefaultAttachmentLimit, 1, api.MaxAttachmentLimit),
		Offset:  args.Int("offset", 0, 0, 1<<31-1)}
	if field, msg, typ := q.FilterProblem(); field != "" {
		args.Add(field, msg, typ)
	}
	if err := args.Err(); err != nil {
		return toolList[api.AttachmentResponse]{}, err
	}
	l, err := s.api.Attachments(ctx, q)
	return pageOf(s.maxResult(), l, q.Offset, q.Limit), err
}

type getAttachmentContentArgs struct {
	AttachmentID string `json:"attachment_id" jsonschema:"the attachment's id: id in list_attachments, or in get_message's attachments"`
}

// toolGetAttachmentContent is GET /v1/attachments/{id}/content?format=base64
// for files up to maxAttachment; a larger one is refused with the
// route that streams it. The content counts against the in-flight budget
// until the answer is written, as a download's does until it is sent.
func (s *Server) toolGetAttachmentContent(ctx context.Context, args api.Args) (api.AttachmentContent, error) {
	args.ForbidExtra("attachment_id")
	id := args.String("attachment_id", true, 1, 0)
	if err := args.Err(); err != nil {
		return api.AttachmentContent{}, err
	}
	att, err := s.api.Attachment(ctx, id)
	if err != nil {
		return api.AttachmentContent{}, err
	}
	if int64(att.Size) > s.maxAttachment() {
		return api.AttachmentContent{}, api.NewError(http.StatusRequestEntityTooLarge, "attachment_too_large", fmt.Sprintf(
			"Attachment %s is %d bytes, more than get_attachment_content returns (%s); download it from "+
				"GET /v1/attachments/%s/content on this server (with the API key), which streams it",
			id, att.Size, sizeText(s.maxAttachment()), url.PathEscape(id)))
	}
	f, err := s.api.OpenAttachment(ctx, id)
	if err != nil {
		return api.AttachmentContent{}, err
	}
	holdForAnswer(ctx, f.Close)
	return f.Base64(), nil
}

// attachmentArg is one file of send_email_with_attachments: the REST body's
// attachment, with content (the Python tool's name) for content_base64.
type attachmentArg struct {
	Filename    string `json:"filename" jsonschema:"the file's name as the recipient sees it, e.g. report.pdf"`
	ContentType string `json:"content_type" jsonschema:"its MIME type, e.g. application/pdf"`
	Content     string `json:"content" jsonschema:"the file's bytes, base64-encoded"`
	Disposition string `json:"disposition,omitempty" jsonschema:"attachment (default) or inline (shown in the HTML, which refers to it as cid:<content_id>)"`
	ContentID   string `json:"content_id,omitempty" jsonschema:"required for inline: the id the HTML's cid: URL names"`
}

type sendWithAttachmentsArgs struct {
	sendEmailArgs
	Attachments []attachmentArg `json:"attachments" jsonschema:"the files, at least one"`
}

const sendWithAttachmentsDescription = `Send an email with files attached: send_email, plus attachments, ` +
	`each {filename, content_type, content (base64)}. Everything send_email says holds here: the send is ` +
	`throttled, and an idempotency_key makes a retry safe.`
