package api

import (
	"context"

	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/store"
)

// The API's operations for its other face, the MCP server (api/mcp),
// besides those the REST handlers export themselves (Inboxes, Threads,
// Message, SearchMessages, Attachments, WindowsOf, Send, ...): each is
// what the route does once it has read its request, so both faces answer
// alike.

// CreateInbox reads a new inbox's name and email_username from args and
// creates it, as POST /v1/inboxes does.
func (a *API) CreateInbox(ctx context.Context, args Args) (*store.Inbox, error) {
	return a.addInbox(ctx, args.obj)
}

// DecodeSend reads and checks a send request from args as POST
// /v1/messages reads its body, scheduled_at and on_throttle included:
// schema problems are one *ValidationError listing all of them; then the
// attachments' content is decoded.
func (a *API) DecodeSend(args Args) (skuld.SendRequest, error) {
	at, queue := a.readHold(args.obj)
	req, err := a.readSend(args.obj)
	if err != nil {
		return skuld.SendRequest{}, err
	}
	req.ScheduledAt, req.QueueOnThrottle = at, queue
	return req, nil
}

// BodyLimit is the size of the largest request body the API reads, in
// bytes: MCP's too.
func (a *API) BodyLimit() int64 { return a.bodyLimit }
