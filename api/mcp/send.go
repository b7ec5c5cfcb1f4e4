package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"

	"github.com/nornweave/nornweave/api"
)

// sendEmailDescription teaches the model the throttle and idempotency.
const sendEmailDescription = `Send an email from an inbox. body is Markdown: it goes out as plain text and ` +
	`rendered to HTML (or pass html to send your own HTML). To reply in a conversation, pass its thread_id.

Sends are throttled per minute and per hour, for all inboxes together and for each inbox. The result's ` +
	`rate_limit tells how many sends the tightest window still accepts and when it frees; get_rate_limit ` +
	`shows every window. A refusal with code rate_limited sent nothing: wait retry_after_seconds, then call ` +
	`again.

Always pass idempotency_key (a new unique string per email, e.g. a UUID) and reuse it when you retry that ` +
	`email: the server sends each key at most once, so a retry after a timeout or a refusal can never send ` +
	`the email twice; a repeat of a send that went out returns its first result, with replayed true.

To send later, pass scheduled_at (RFC 3339 with an offset, YYYY-MM-DDThh:mm:ss+00:00, at most ` +
	`SCHEDULE_MAX_AHEAD ahead, by default 30 days: e.g. to send in an hour, the current UTC time plus one ` +
	`hour): the result's ` +
	`status is scheduled and the server sends it then. To have a throttled send wait for room instead of being ` +
	`refused, pass on_throttle "queue": the status is queued, next_attempt_at says when it should go, and the ` +
	`server sends it as soon as the windows allow. A scheduled or queued email can be stopped with ` +
	`cancel_message until it starts sending; get_message tells its status later (sent or failed).`

type sendEmailArgs struct {
	InboxID        string   `json:"inbox_id" jsonschema:"the inbox to send from: its address is the From"`
	To             []string `json:"to,omitempty" jsonschema:"the recipients' addresses (at least one, or give recipient)"`
	Recipient      string   `json:"recipient,omitempty" jsonschema:"one recipient's address, instead of to"`
	Cc             []string `json:"cc,omitempty" jsonschema:"copy recipients' addresses"`
	Bcc            []string `json:"bcc,omitempty" jsonschema:"blind copy recipients' addresses"`
	Subject        string   `json:"subject" jsonschema:"the subject line (one line)"`
	Body           string   `json:"body" jsonschema:"the message in Markdown (may be empty when html is given)"`
	HTML           string   `json:"html,omitempty" jsonschema:"HTML to send instead of the rendering of body"`
	ThreadID       string   `json:"thread_id,omitempty" jsonschema:"reply in this thread (one of the same inbox): threading headers and subject follow"`
	IdempotencyKey string   `json:"idempotency_key,omitempty" jsonschema:"a unique string per email (1 to 255 printable ASCII characters); the same key is never sent twice"`
	ScheduledAt    string   `json:"scheduled_at,omitempty" jsonschema:"send at this time instead of now: RFC 3339 with an offset, at most SCHEDULE_MAX_AHEAD (default 30 days) ahead; now or past sends now"`
	OnThrottle     string   `json:"on_throttle,omitempty" jsonschema:"what a throttled send gets: reject (a rate_limited refusal) or queue (held and sent when the windows have room); default: the server's SEND_ON_THROTTLE"`
	RespondAsync   *bool    `json:"respond_async,omitempty" jsonschema:"true: answer status queued as soon as the email is recorded and send it in the background (get_message or a message.sent/message.failed webhook tells the outcome); false: answer after the send; default: the server's SEND_RESPOND_ASYNC"`
}

type sendEmailResult struct {
	MessageID         string         `json:"message_id" jsonschema:"the message's id (get_message)"`
	ThreadID          string         `json:"thread_id" jsonschema:"the conversation's id: pass it as thread_id to reply in it"`
	Status            string         `json:"status" jsonschema:"sent: the provider accepted it; failed: it could not be sent (see error); scheduled: held until scheduled_at; queued: held until next_attempt_at (throttled, or respond_async); recorded either way"`
	Error             *string        `json:"error" jsonschema:"why a failed message failed"`
	ProviderMessageID *string        `json:"provider_message_id" jsonschema:"the email provider's id of the message"`
	Replayed          bool           `json:"replayed" jsonschema:"true when idempotency_key matched an earlier send: this is its result and nothing was sent again"`
	RateLimit         *sendWindow    `json:"rate_limit" jsonschema:"the tightest send window after this send; null when sends are not limited"`
	ScheduledAt       *api.Timestamp `json:"scheduled_at" jsonschema:"when a scheduled email is due; null otherwise"`
	NextAttemptAt     *api.Timestamp `json:"next_attempt_at" jsonschema:"when a queued email's windows should have room; null otherwise"`
}

// sentMessage is what a tool result repeats of the answer of POST
// /v1/messages (api.SendAnswer's Body).
type sentMessage struct {
	ID                string         `json:"id"`
	ThreadID          string         `json:"thread_id"`
	ProviderMessageID *string        `json:"provider_message_id"`
	Status            string         `json:"status"`
	Error             *string        `json:"error"`
	ScheduledAt       *api.Timestamp `json:"scheduled_at"`
	NextAttemptAt     *api.Timestamp `json:"next_attempt_at"`
}

// sendWindow is the window a send's answer describes, as the REST API's
// X-RateLimit-* headers do.
type sendWindow struct {
	Window       string `json:"window" jsonschema:"per-minute, per-hour, inbox-per-minute or inbox-per-hour"`
	Limit        int    `json:"limit"`
	Remaining    int    `json:"remaining" jsonschema:"sends the window accepts now"`
	ResetSeconds int    `json:"reset_seconds" jsonschema:"seconds until the window's next slot frees"`
}

// toolSendEmail is POST /v1/messages as a tool: the arguments are read by
// the same binder (api.API.DecodeSend), idempotency_key is the
// Idempotency-Key, and the send takes the same path (api.API.Send:
// filter, throttle, idempotency, record).
func (s *Server) toolSendEmail(ctx context.Context, args api.Args) (sendEmailResult, error) {
	return s.sendEmail(ctx, args, false)
}

// toolSendWithAttachments is send_email_with_attachments: send_email whose
// attachments are required.
func (s *Server) toolSendWithAttachments(ctx context.Context, args api.Args) (sendEmailResult, error) {
	return s.sendEmail(ctx, args, true)
}

// sendEmail is send_email, with attachments (at least one) or without any.
func (s *Server) sendEmail(ctx context.Context, args api.Args, withFiles bool) (_ sendEmailResult, err error) {
	defer func() { s.api.CountRefusal(err) }()
	key, err := idempotencyArg(args)
	if err != nil {
		return sendEmailResult{}, err
	}
	async := respondAsyncArg(args, s.api.RespondAsync)
	if raw, ok := args.Fields()["recipient"]; ok {
		delete(args.Fields(), "recipient")
		if _, both := args.Fields()["to"]; both {
			args.Add("recipient", "Give to or recipient, not both", "value_error")
		} else if string(raw) != "null" {
			args.Fields()["to"] = json.RawMessage("[" + string(raw) + "]")
		}
	}
	// What the REST body has and the tool does not offer.
	absent := []string{"reply_to", "attachments"}
	if withFiles {
		absent = absent[:1]
		var files []json.RawMessage
		switch raw, ok := args.Present("attachments"); {
		case !ok:
			args.Add("attachments", "Field required", "missing")
		case json.Unmarshal(raw, &files) == nil && len(files) == 0:
			args.Add("attachments", "At least one attachment is required (send_email sends without)", "too_short")
		}
	}
	for _, name := range absent {
		if _, ok := args.Fields()[name]; ok {
			args.Add(name, "Extra inputs are not permitted", "extra_forbidden")
			delete(args.Fields(), name)
		}
	}
	// A retry must match the first call: the arguments as the server read
	// them (keys sorted, whitespace dropped), so that a model reordering
	// them is still the same request.
	canonical, err := json.Marshal(args.Fields())
	if err != nil {
		return sendEmailResult{}, err
	}
	sum := sha256.Sum256(canonical)
	args = args.Renamed(map[string]string{"reply_to_thread_id": "thread_id", "content_base64": "content"})
	req, err := s.api.DecodeSend(args)
	if err != nil {
		return sendEmailResult{}, err
	}
	req.Async = async
	ans, err := s.api.Send(ctx, req, key, hex.EncodeToString(sum[:]))
	if err != nil {
		return sendEmailResult{}, err
	}
	var res sentMessage
	if err := json.Unmarshal(ans.Body, &res); err != nil {
		return sendEmailResult{}, err
	}
	out := sendEmailResult{MessageID: res.ID, ThreadID: res.ThreadID, Status: res.Status, Error: res.Error,
		ProviderMessageID: res.ProviderMessageID, Replayed: ans.Replayed, ScheduledAt: res.ScheduledAt,
		NextAttemptAt: res.NextAttemptAt}
	if tight, _, ok := api.TightWindow(ans.Windows, nil); ans.WindowsRead && ok {
		out.RateLimit = &sendWindow{Window: tight.Window.String(), Limit: tight.Limit,
			Remaining: tight.Remaining, ResetSeconds: tight.ResetSeconds}
	}
	return out, nil
}

// respondAsyncArg takes respond_async out of args (it says how to answer,
// not what to send), def when absent.
func respondAsyncArg(args api.Args, def bool) bool {
	raw, ok := args.Present("respond_async")
	delete(args.Fields(), "respond_async")
	if !ok {
		return def
	}
	var async bool
	if err := json.Unmarshal(raw, &async); err != nil {
		args.Add("respond_async", "Input should be a valid boolean", "bool_type")
	}
	return async
}

// idempotencyArg takes idempotency_key out of args (it is not part of the
// request it names) and checks it as the Idempotency-Key header is checked.
func idempotencyArg(args api.Args) (string, error) {
	raw, ok := args.Present("idempotency_key")
	delete(args.Fields(), "idempotency_key")
	if !ok {
		return "", nil
	}
	var key string
	if err := json.Unmarshal(raw, &key); err != nil {
		args.Add("idempotency_key", "Input should be a valid string", "string_type")
		return "", nil
	}
	if !api.ValidIdempotencyKey(key) {
		return "", api.NewError(http.StatusUnprocessableEntity, "invalid_idempotency_key",
			"idempotency_key must be 1 to 255 printable ASCII characters")
	}
	return key, nil
}

// rateLimitDescription teaches the model to read the windows.
const rateLimitDescription = `Read the send throttle as it is now: the windows of all sends together ` +
	`(per_minute, per_hour) and, with inbox_id, that inbox's own (inbox). In each window: limit (0 means ` +
	`unlimited, and the counters are null), used (sends counted in the last minute or hour), in_flight ` +
	`(being sent now), remaining (how many more sends are accepted now) and reset_seconds (when the next ` +
	`slot frees). A send needs room in every window that applies to it: send at most the smallest ` +
	`remaining now, and space the rest by reset_seconds.`

type rateLimitArgs struct {
	InboxID string `json:"inbox_id,omitempty" jsonschema:"also read this inbox's own windows"`
}

type rateLimitResult struct {
	Unit      string                 `json:"unit" jsonschema:"what the limits count: message, or recipient (each unique to, cc and bcc address)"`
	PerSecond *api.WindowResponse    `json:"per_second" jsonschema:"every send, in any second"`
	PerMinute api.WindowResponse     `json:"per_minute" jsonschema:"every send, in any 60 seconds"`
	PerHour   api.WindowResponse     `json:"per_hour" jsonschema:"every send, in any hour"`
	PerDay    api.WindowResponse     `json:"per_day" jsonschema:"every send, in any 24 hours"`
	Inbox     *api.RateLimitResponse `json:"inbox" jsonschema:"the inbox's own windows; null without inbox_id"`
}

func (s *Server) toolGetRateLimit(ctx context.Context, args api.Args) (rateLimitResult, error) {
	args.ForbidExtra("inbox_id")
	id := args.String("inbox_id", false, 0, 0)
	if err := args.Err(); err != nil {
		return rateLimitResult{}, err
	}
	snap, err := s.api.WindowsOf(ctx, id)
	if err != nil {
		return rateLimitResult{}, err
	}
	g := s.api.ToRateLimit(snap.Global, true)
	out := rateLimitResult{Unit: g.Unit, PerSecond: g.PerSecond, PerMinute: g.PerMinute, PerHour: g.PerHour, PerDay: g.PerDay}
	if id != "" {
		in := s.api.ToRateLimit(snap.Inbox, false)
		out.Inbox = &in
	}
	return out, nil
}
