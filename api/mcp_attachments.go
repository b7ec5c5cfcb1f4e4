package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
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

func (a *API) toolListAttachments(ctx context.Context, args object) (toolList[AttachmentResponse], error) {
	args.forbidExtra("message_id", "thread_id", "inbox_id", "limit", "offset")
	q := AttachmentQuery{MessageID: args.str("message_id", false, 0, 0), ThreadID: args.str("thread_id", false, 0, 0),
		InboxID: args.str("inbox_id", false, 0, 0),
		Limit:   args.integer("limit", DefaultAttachmentLimit, 1, MaxAttachmentLimit),
		Offset:  args.integer("offset", 0, 0, 1<<31-1)}
	if field, msg, typ := q.FilterProblem(); field != "" {
		args.add(field, msg, typ)
	}
	if err := args.err(); err != nil {
		return toolList[AttachmentResponse]{}, err
	}
	l, err := a.Attachments(ctx, q)
	return pageOf(l, q.Offset, q.Limit), err
}

type getAttachmentContentArgs struct {
	AttachmentID string `json:"attachment_id" jsonschema:"the attachment's id: id in list_attachments, or in get_message's attachments"`
}

// toolGetAttachmentContent is GET /v1/attachments/{id}/content?format=base64
// for files up to maxToolAttachment; a larger one is refused with the
// route that streams it. The content counts against the in-flight budget
// until the answer is written, as a download's does until it is sent.
func (a *API) toolGetAttachmentContent(ctx context.Context, args object) (AttachmentContent, error) {
	args.forbidExtra("attachment_id")
	id := args.str("attachment_id", true, 1, 0)
	if err := args.err(); err != nil {
		return AttachmentContent{}, err
	}
	att, err := a.Attachment(ctx, id)
	if err != nil {
		return AttachmentContent{}, err
	}
	if att.Size > maxToolAttachment {
		return AttachmentContent{}, newError(http.StatusRequestEntityTooLarge, "attachment_too_large", fmt.Sprintf(
			"Attachment %s is %d bytes, more than get_attachment_content returns (%d MiB); download it from "+
				"GET /v1/attachments/%s/content on this server (with the API key), which streams it",
			id, att.Size, maxToolAttachment>>20, url.PathEscape(id)))
	}
	f, err := a.OpenAttachment(ctx, id)
	if err != nil {
		return AttachmentContent{}, err
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
