package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nornweave/nornweave/api"
	"github.com/nornweave/nornweave/store"
)

// recentThreads is how many threads email://inbox/{id}/recent lists, as
// the Python server's resource does.
const recentThreads = 10

// addResources adds the Python server's two resources: an inbox's recent
// threads and a thread as Markdown.
func (s *Server) addResources() {
	s.sdk.AddResourceTemplate(&sdk.ResourceTemplate{Name: "inbox_recent", Title: "Recent threads of an inbox",
		URITemplate: "email://inbox/{id}/recent", MIMEType: "application/json",
		Description: "The 10 conversations of an inbox with the latest activity, as list_threads returns them."},
		s.resource("email://inbox/", "/recent", "application/json", func(ctx context.Context, id string) (string, error) {
			out, err := s.api.Threads(ctx, id, recentThreads, 0)
			if err != nil {
				return "", err
			}
			return api.MarshalNoEscape(out)
		}))
	s.sdk.AddResourceTemplate(&sdk.ResourceTemplate{Name: "thread", Title: "A conversation",
		URITemplate: "email://thread/{id}", MIMEType: "text/markdown",
		Description: "A conversation as Markdown, oldest message first, as get_thread renders it."},
		s.resource("email://thread/", "", "text/markdown", func(ctx context.Context, id string) (string, error) {
			v, err := s.threadView(ctx, id)
			return v.Markdown, err
		}))
}

// resource serves the URIs prefix + id + suffix with read(id). A missing
// inbox or thread is the protocol's "resource not found"; other failures
// are the API's sentence (internal ones generic, their cause logged).
func (s *Server) resource(prefix, suffix, mimeType string, read func(ctx context.Context, id string) (string, error)) sdk.ResourceHandler {
	return func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		uri := req.Params.URI
		id, ok := strings.CutPrefix(uri, prefix)
		if id, ok = strings.CutSuffix(id, suffix); !ok || id == "" || strings.Contains(id, "/") {
			return nil, sdk.ResourceNotFoundError(uri)
		}
		text, err := read(ctx, id)
		if err != nil {
			p := s.api.Classify(ctx, err, slog.String("resource", prefix+"{id}"+suffix))
			if p.Code == "not_found" {
				return nil, sdk.ResourceNotFoundError(uri)
			}
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: p.Detail}
		}
		if err := s.chargeAnswer(ctx, answerCopies*int64(len(text))); err != nil {
			p := s.api.Classify(ctx, err, slog.String("resource", prefix+"{id}"+suffix))
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: p.Detail}
		}
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: mimeType, Text: text}}}, nil
	}
}

// threadResult is get_thread's answer: the conversation to read, and its
// messages as data.
type threadResult struct {
	ID       string              `json:"id"`
	Subject  string              `json:"subject"`
	Summary  *string             `json:"summary"`
	Markdown string              `json:"markdown" jsonschema:"the conversation as Markdown, oldest message first"`
	Messages []api.ThreadMessage `json:"messages" jsonschema:"the messages, oldest first; outbound mail is role assistant, written by the inbox"`
	// Truncated is set when the text passed api.MaxPageBytes.
	Truncated bool `json:"truncated" jsonschema:"true when the conversation is longer than one answer holds (8 MB of text): the newest messages are left out; read them with list_messages"`
}

func (r threadResult) toolText() string { return r.Markdown }

// errTruncated stops a walk whose answer is full.
var errTruncated = errors.New("answer full")

// threadView reads a thread as get_thread and email://thread/{id} show
// it: every message up to api.MaxPageBytes of text, oldest first, as Markdown
// and as data.
func (s *Server) threadView(ctx context.Context, id string) (threadResult, error) {
	t, err := s.api.Thread(ctx, id)
	if err != nil {
		return threadResult{}, err
	}
	msgs, err := s.api.Conversation(ctx, t)
	if err != nil {
		return threadResult{}, err
	}
	out := threadResult{ID: t.ID, Subject: t.Subject, Summary: t.Summary, Messages: []api.ThreadMessage{}}
	var md strings.Builder
	fmt.Fprintf(&md, "# %s\n\n", oneLine(t.Subject))
	size := 0
	err = s.api.WalkBodies(ctx, msgs, func(i int, m *store.Message) error {
		// Twice (the Markdown and the message), as JSON: the answer's cap.
		if size += 2*jsonSize(m.Text) + api.ItemOverhead; int64(size) > s.maxResult()-pageEnvelope && i > 0 {
			return errTruncated
		}
		out.Messages = append(out.Messages, api.ToThreadMessage(m))
		writeMessageMarkdown(&md, m)
		return nil
	})
	switch {
	case errors.Is(err, errTruncated):
		out.Truncated = true
		fmt.Fprintf(&md, "_%d later messages are not shown: read them with list_messages._\n",
			len(msgs)-len(out.Messages))
	case err != nil:
		return threadResult{}, err
	}
	out.Markdown = md.String()
	return out, nil
}

// writeMessageMarkdown writes one message: who wrote to whom and when, its
// outcome if it was not sent, then its Markdown text as it was written.
func writeMessageMarkdown(md *strings.Builder, m *store.Message) {
	ts := m.CreatedAt
	if m.SentAt != nil {
		ts = *m.SentAt
	}
	fmt.Fprintf(md, "---\n\n**From:** %s  \n", m.FromAddress)
	for _, h := range []struct {
		name  string
		addrs []string
	}{{"To", m.ToAddresses}, {"Cc", m.CcAddresses}} {
		if len(h.addrs) > 0 {
			fmt.Fprintf(md, "**%s:** %s  \n", h.name, strings.Join(h.addrs, ", "))
		}
	}
	fmt.Fprintf(md, "**Date:** %s  \n", ts.UTC().Format(time.RFC3339))
	if m.Status != "sent" {
		fmt.Fprintf(md, "**Status:** %s", m.Status)
		if m.Error != nil {
			fmt.Fprintf(md, " (%s)", oneLine(*m.Error))
		}
		md.WriteString("  \n")
	}
	md.WriteString("\n" + strings.TrimSpace(m.Text) + "\n\n")
}

// oneLine keeps a header value on its line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// jsonSize is how many bytes s takes as a JSON string's contents, as
// api.MarshalNoEscape writes it: quotes, backslashes and control characters
// are escaped, invalid UTF-8 becomes \ufffd.
func jsonSize(s string) int {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
			n, i = n+2, i+1
		case c < 0x20:
			n, i = n+6, i+1
		case c < utf8.RuneSelf:
			n, i = n+1, i+1
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size == 1:
				n += 6
			case r == '\u2028' || r == '\u2029':
				n += 6
			default:
				n += size
			}
			i += size
		}
	}
	return n
}
