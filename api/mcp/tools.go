package mcp

import (
	"context"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nornweave/nornweave/api"
	"github.com/nornweave/nornweave/skuld/events"
	"github.com/nornweave/nornweave/store"
)

// The tools, by the Python server's names (create_inbox, send_email,
// search_email, list_messages) and ours. Each argument type documents the
// arguments for the model and gives the input schema; the REST binder
// reads them (mcpTool); send_email's scheduled_at and on_throttle are read
// as POST /v1/messages reads them (api.API.DecodeSend).

// tools lists every tool, in the order a client shows them.
func (s *Server) tools() []mcpTool {
	return []mcpTool{
		tool[createInboxArgs, createInboxResult](toolInfo{name: "create_inbox", title: "Create an inbox", idempotent: true,
			desc: "Create an inbox: an address on the server's email domain (username@domain) that " +
				"send_email sends from. Returns its id, which every other tool takes as inbox_id. " +
				"Fails with conflict if the address exists; use list_inboxes to find it."}, s.toolCreateInbox),
		tool[pageArgs, toolList[api.InboxResponse]](toolInfo{name: "list_inboxes", title: "List inboxes", readOnly: true,
			desc: "List the inboxes, by address: their ids (inbox_id elsewhere), addresses and names."},
			s.toolListInboxes),
		tool[sendEmailArgs, sendEmailResult](toolInfo{name: "send_email", title: "Send an email",
			desc: sendEmailDescription, openWorld: true}, s.toolSendEmail),
		tool[listMessagesArgs, messagesResult](toolInfo{name: "list_messages", title: "List messages", readOnly: true,
			desc: "List the messages of an inbox or of a thread, newest first, with their full content. " +
				"total is how many there are; page with limit and offset."}, s.toolListMessages),
		tool[getMessageArgs, api.MessageDetail](toolInfo{name: "get_message", title: "Get a message", readOnly: true,
			desc: "Get one message: recipients, subject, the Markdown text and the HTML that was sent, " +
				"its status (sent, failed and why), its threading headers, its attachments " +
				"(get_attachment_content reads one), and each recipient's delivery state in recipients " +
				"(delivered, bounced, complained, delayed, ... as the provider reported it)."}, s.toolGetMessage),
		tool[searchEmailArgs, searchResult](toolInfo{name: "search_email", title: "Search email", readOnly: true,
			desc: "Find the messages of an inbox or a thread whose subject or body contains query " +
				"(case-insensitive), newest first."}, s.toolSearchEmail),
		tool[listThreadsArgs, toolList[api.ThreadSummary]](toolInfo{name: "list_threads", title: "List threads", readOnly: true,
			desc: "List an inbox's conversations (threads), most recent activity first: subject, " +
				"message count and last activity. Read one with get_thread."}, s.toolListThreads),
		tool[getThreadArgs, threadResult](toolInfo{name: "get_thread", title: "Read a thread", readOnly: true,
			desc: "Read a conversation, oldest message first: as Markdown to read, and as a list of " +
				"messages. To reply in it, pass its id to send_email as thread_id."}, s.toolGetThread),
		tool[rateLimitArgs, rateLimitResult](toolInfo{name: "get_rate_limit", title: "Read the send throttle",
			readOnly: true, desc: rateLimitDescription}, s.toolGetRateLimit),
		tool[sendWithAttachmentsArgs, sendEmailResult](toolInfo{name: "send_email_with_attachments",
			title: "Send an email with attachments", desc: sendWithAttachmentsDescription, openWorld: true},
			s.toolSendWithAttachments),
		tool[listAttachmentsArgs, toolList[api.AttachmentResponse]](toolInfo{name: "list_attachments", title: "List attachments",
			readOnly: true, desc: "List the files sent with a message, a thread or an inbox (exactly one of " +
				"message_id, thread_id and inbox_id): their ids, names, types and sizes. Read one's content " +
				"with get_attachment_content."}, s.toolListAttachments),
		tool[getMessageArgs, api.MessageResponse](toolInfo{name: "cancel_message", title: "Cancel a held email",
			idempotent: true, destructive: true,
			desc: "Cancel an email that send_email scheduled (scheduled_at) or queued (on_throttle queue), " +
				"before it starts sending: it is then never sent, and its status is canceled. An email that " +
				"is sending, sent, failed or canceled already is refused with code not_cancelable (read it " +
				"with get_message)."}, s.toolCancelMessage),
		tool[getAttachmentContentArgs, api.AttachmentContent](toolInfo{name: "get_attachment_content",
			title: "Get an attachment's content", readOnly: true,
			desc: "Get the content of a file that was sent, base64-encoded, with its name and MIME type. " +
				"Files over 5 MiB are refused with code attachment_too_large and the REST URL that streams them."},
			s.toolGetAttachmentContent),
		tool[listSuppressionsArgs, suppressionsResult](toolInfo{name: "list_suppressions", title: "List suppressed addresses",
			readOnly: true, desc: "List the addresses no email may be sent to, newest first: each with its reason " +
				"(bounce: it bounced hard; complaint: its owner marked our mail as spam; manual: an operator " +
				"added it) and when. send_email to any of them is refused with code recipient_suppressed."},
			s.toolListSuppressions),
		tool[removeSuppressionArgs, removeSuppressionResult](toolInfo{name: "remove_suppression",
			title: "Allow sending to a suppressed address again", idempotent: true, destructive: true,
			desc: "Take an address off the suppression list, so that send_email may send to it again. Only do " +
				"this when you know the address works again (its owner asked, or fixed their mailbox): mail to " +
				"addresses that bounce or complain harms every sender on this server. Fails with not_found if " +
				"the address is not on the list."}, s.toolRemoveSuppression),
	}
}

type listSuppressionsArgs struct {
	Email  string `json:"email,omitempty" jsonschema:"only this address (any spelling)"`
	Reason string `json:"reason,omitempty" jsonschema:"only this reason: bounce, complaint or manual"`
	pageArgs
}

type suppressionsResult struct {
	Items []api.SuppressionResponse `json:"items"`
	Count int                       `json:"count" jsonschema:"items in this page"`
	Total int64                     `json:"total" jsonschema:"suppressed addresses matching, in all"`
}

func (s *Server) toolListSuppressions(ctx context.Context, args api.Args) (suppressionsResult, error) {
	args.ForbidExtra("email", "reason", "limit", "offset")
	email := args.String("email", false, 0, 320)
	reason := args.String("reason", false, 0, 0)
	limit, offset := page(args, api.MaxLimit)
	if err := args.Err(); err != nil {
		return suppressionsResult{}, err
	}
	l, err := s.api.Suppressions(ctx, email, reason, limit, offset)
	return suppressionsResult{Items: l.Items, Count: l.Count, Total: l.Total}, err
}

type removeSuppressionArgs struct {
	Email string `json:"email" jsonschema:"the address to allow again"`
}

type removeSuppressionResult struct {
	Email   string `json:"email" jsonschema:"the address, in canonical form"`
	Removed bool   `json:"removed" jsonschema:"always true: an address not on the list is refused with not_found"`
}

func (s *Server) toolRemoveSuppression(ctx context.Context, args api.Args) (removeSuppressionResult, error) {
	args.ForbidExtra("email")
	email := args.String("email", true, 1, 320)
	if err := args.Err(); err != nil {
		return removeSuppressionResult{}, err
	}
	if err := s.api.RemoveSuppression(ctx, email); err != nil {
		return removeSuppressionResult{}, err
	}
	return removeSuppressionResult{Email: events.Canonical(email), Removed: true}, nil
}

// toolInfo is what a tool's definition says besides its schemas.
type toolInfo struct {
	name, title, desc string
	readOnly          bool // reads only: a client may call it without asking
	openWorld         bool // reaches outside the server (sends mail)
	// idempotent: a repeat with the same arguments changes nothing more
	// (every read-only tool is).
	idempotent bool
	// destructive: it may undo or destroy something (cancel_message);
	// for tools that write only.
	destructive bool
}

// tool defines a tool whose arguments In documents and whose result is
// Out; run reads the arguments with the REST binder.
func tool[In, Out any](info toolInfo, run func(ctx context.Context, args api.Args) (Out, error)) mcpTool {
	open := info.openWorld
	ann := &sdk.ToolAnnotations{Title: info.title, ReadOnlyHint: info.readOnly, OpenWorldHint: &open,
		IdempotentHint: info.readOnly || info.idempotent}
	if !info.readOnly {
		destructive := info.destructive
		ann.DestructiveHint = &destructive
	}
	in := inputSchema[In]()
	// What the binder checks and a Go type cannot say.
	if p := in.Properties["on_throttle"]; p != nil {
		p.Enum = []any{"reject", "queue"}
	}
	if p := in.Properties["scheduled_at"]; p != nil {
		p.Format = "date-time"
	}
	return mcpTool{
		def: &sdk.Tool{Name: info.name, Title: info.title, Description: info.desc,
			InputSchema: in, OutputSchema: outputSchema[Out](), Annotations: ann},
		run: func(ctx context.Context, args api.Args) (any, error) { return run(ctx, args) },
	}
}

type createInboxArgs struct {
	Name     string `json:"name" jsonschema:"the display name of the inbox's messages, e.g. Support (1 to 255 characters)"`
	Username string `json:"username" jsonschema:"the part of the address before the @: support gives support@<the server's domain>"`
}

type createInboxResult struct {
	ID           string `json:"id" jsonschema:"the inbox's id: inbox_id in the other tools"`
	EmailAddress string `json:"email_address"`
	Name         string `json:"name"`
}

func (s *Server) toolCreateInbox(ctx context.Context, args api.Args) (createInboxResult, error) {
	in, err := s.api.CreateInbox(ctx, args.Renamed(map[string]string{"email_username": "username"}))
	if err != nil {
		return createInboxResult{}, err
	}
	return createInboxResult{ID: in.ID, EmailAddress: in.EmailAddress, Name: in.Name}, nil
}

// pageArgs are the arguments of a list: limit and offset, as the REST
// API's query parameters.
type pageArgs struct {
	Limit  int `json:"limit,omitempty" jsonschema:"how many items at most, 1 to 500 (default 50)"`
	Offset int `json:"offset,omitempty" jsonschema:"how many to skip (default 0)"`
}

// page reads limit and offset within the REST API's bounds.
func page(args api.Args, maxItems int) (limit, offset int) {
	return args.Int("limit", api.DefaultLimit, 1, maxItems), args.Int("offset", 0, 0, 1<<31-1)
}

func (s *Server) toolListInboxes(ctx context.Context, args api.Args) (toolList[api.InboxResponse], error) {
	args.ForbidExtra("limit", "offset")
	limit, offset := page(args, api.MaxLimit)
	if err := args.Err(); err != nil {
		return toolList[api.InboxResponse]{}, err
	}
	l, err := s.api.Inboxes(ctx, limit, offset)
	return pageOf(s.maxResult(), l, offset, limit), err
}

type listMessagesArgs struct {
	InboxID  string `json:"inbox_id,omitempty" jsonschema:"the inbox whose messages to list (give inbox_id, thread_id or both)"`
	ThreadID string `json:"thread_id,omitempty" jsonschema:"the thread whose messages to list"`
	pageArgs
}

type messagesResult struct {
	Items []api.MessageResponse `json:"items"`
	Count int                   `json:"count" jsonschema:"messages in this page"`
	Total int64                 `json:"total" jsonschema:"messages in all"`
	// NextOffset is where the next page starts; nil on the last.
	NextOffset *int `json:"next_offset" jsonschema:"pass it as offset to read the next page: more messages follow (this page was full, or cut to fit one answer: 8 MiB of JSON); null when it is the last"`
}

func (s *Server) toolListMessages(ctx context.Context, args api.Args) (messagesResult, error) {
	args.ForbidExtra("inbox_id", "thread_id", "limit", "offset")
	f := store.MessageFilter{InboxID: args.String("inbox_id", false, 0, 0), ThreadID: args.String("thread_id", false, 0, 0)}
	f.Limit, f.Offset = page(args, api.MaxLimit)
	if err := args.Err(); err != nil {
		return messagesResult{}, err
	}
	msgs, total, err := s.api.Messages(ctx, f, "arguments")
	if err != nil {
		return messagesResult{}, err
	}
	items := make([]api.MessageResponse, len(msgs))
	for i := range msgs {
		items[i] = api.ToMessage(&msgs[i])
	}
	items, next := fitPage(s.maxResult(), items, f.Offset, f.Limit, int64(f.Offset+len(msgs)) < total)
	return messagesResult{Items: items, Count: len(items), Total: total, NextOffset: next}, nil
}

type getMessageArgs struct {
	MessageID string `json:"message_id" jsonschema:"the message's id (message_id of send_email, id in the lists)"`
}

func (s *Server) toolGetMessage(ctx context.Context, args api.Args) (api.MessageDetail, error) {
	args.ForbidExtra("message_id")
	id := args.String("message_id", true, 1, 0)
	if err := args.Err(); err != nil {
		return api.MessageDetail{}, err
	}
	return s.api.Message(ctx, id)
}

// toolCancelMessage is POST /v1/messages/{id}/cancel.
func (s *Server) toolCancelMessage(ctx context.Context, args api.Args) (api.MessageResponse, error) {
	args.ForbidExtra("message_id")
	id := args.String("message_id", true, 1, 0)
	if err := args.Err(); err != nil {
		return api.MessageResponse{}, err
	}
	m, err := s.api.CancelMessage(ctx, id)
	if err != nil {
		return api.MessageResponse{}, err
	}
	return api.ToMessage(m), nil
}

type searchEmailArgs struct {
	Query    string `json:"query" jsonschema:"the text to find in subjects and bodies (1 to 256 characters)"`
	InboxID  string `json:"inbox_id,omitempty" jsonschema:"the inbox to search (give inbox_id, thread_id or both)"`
	ThreadID string `json:"thread_id,omitempty" jsonschema:"the thread to search"`
	Limit    int    `json:"limit,omitempty" jsonschema:"how many matches at most, 1 to 100 (default 50)"`
	Offset   int    `json:"offset,omitempty" jsonschema:"how many matches to skip (default 0)"`
}

type searchResult struct {
	Query string           `json:"query"`
	Items []api.SearchItem `json:"items"`
	Count int              `json:"count"`
	// NextOffset is where the next page starts; nil on the last.
	NextOffset *int `json:"next_offset" jsonschema:"pass it as offset to read the next page: this page was full (limit) or cut to fit one answer (8 MiB of JSON); null when it is the last"`
}

func (s *Server) toolSearchEmail(ctx context.Context, args api.Args) (searchResult, error) {
	args.ForbidExtra("query", "inbox_id", "thread_id", "limit", "offset")
	q := api.SearchQuery{Query: args.String("query", true, 1, api.MaxQueryLen), InboxID: args.String("inbox_id", false, 0, 0),
		ThreadID: args.String("thread_id", false, 0, 0)}
	q.Limit, q.Offset = page(args, api.MaxSearchLimit)
	if _, hasInbox := args.Present("inbox_id"); !hasInbox && q.ThreadID == "" {
		args.Add("inbox_id", "At least one of inbox_id or thread_id is required", "missing")
	}
	if err := args.Err(); err != nil {
		return searchResult{}, err
	}
	msgs, err := s.api.SearchMessages(ctx, q, "arguments")
	if err != nil {
		return searchResult{}, err
	}
	items := make([]api.SearchItem, len(msgs))
	for i := range msgs {
		items[i] = api.ToSearchItem(&msgs[i])
	}
	items, next := fitPage(s.maxResult(), items, q.Offset, q.Limit, false)
	return searchResult{Query: q.Query, Items: items, Count: len(items), NextOffset: next}, nil
}

type listThreadsArgs struct {
	InboxID string `json:"inbox_id" jsonschema:"the inbox whose threads to list"`
	pageArgs
}

func (s *Server) toolListThreads(ctx context.Context, args api.Args) (toolList[api.ThreadSummary], error) {
	args.ForbidExtra("inbox_id", "limit", "offset")
	id := args.String("inbox_id", true, 0, 0)
	limit, offset := page(args, api.MaxLimit)
	if err := args.Err(); err != nil {
		return toolList[api.ThreadSummary]{}, err
	}
	l, err := s.api.Threads(ctx, id, limit, offset)
	return pageOf(s.maxResult(), l, offset, limit), err
}

type getThreadArgs struct {
	ThreadID string `json:"thread_id" jsonschema:"the thread's id (thread_id of send_email and of the messages)"`
}

func (s *Server) toolGetThread(ctx context.Context, args api.Args) (threadResult, error) {
	args.ForbidExtra("thread_id")
	id := args.String("thread_id", true, 0, 0)
	if err := args.Err(); err != nil {
		return threadResult{}, err
	}
	return s.threadView(ctx, id)
}
