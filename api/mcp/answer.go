package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/nornweave/nornweave/api"
)

// What one MCP answer may cost. A tool's result is capped at the REST
// page's size, a list is cut to fit (with next_offset to read on), and the
// answer holds its share of REQUESTS_IN_FLIGHT_MB until it is written.

// maxResult caps the JSON of a tool's structuredContent: the REST page's
// api.MaxPageBytes (the API's PageBytes). A list longer than that is cut,
// after at least one item, and says where the next page starts.
func (s *Server) maxResult() int64 { return s.api.PageBytes }

// pageEnvelope is room kept in maxResult for a page's fields other than
// its items.
const pageEnvelope = 4 << 10

// maxInlineText is the largest result whose JSON is also the text
// content. Above it the text says where the data is, so that an answer
// never carries a large payload twice.
const maxInlineText = 16 << 10

// maxAttachment is the largest attachment get_attachment_content returns:
// five eighths of maxResult, 5 MiB (6.7 MiB in base64, inside the 8 MiB).
// Larger files are downloaded from the REST route, which streams them.
func (s *Server) maxAttachment() int64 { return s.maxResult() * 5 / 8 }

// sizeText is n bytes as a person reads a limit: "5 MiB", "40 KiB".
func sizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// answerCopies is how many copies of a result's JSON an answer holds at
// once: ours (the encoder's buffer, the string, the raw structuredContent)
// and the SDK's (the result it marshals, the JSON-RPC message carrying
// it). Four of them are alive together at the peak; 8 concurrent 5 MiB
// attachments grew RSS by 3.2 times the budget when two were counted.
const answerCopies = 4

// answerAccount is what one /mcp request holds of the in-flight budget
// for its answer; serveMCP gives it all back once the answer is written.
// Safe for concurrent use.
type answerAccount struct {
	mu       sync.Mutex
	releases []func()
}

type answerAccountKey struct{}

// withAnswerAccount opens the account of a request; release closes it.
func withAnswerAccount(ctx context.Context) (context.Context, func()) {
	acc := &answerAccount{}
	return context.WithValue(ctx, answerAccountKey{}, acc), acc.release
}

// hold keeps release until the answer is written.
func (acc *answerAccount) hold(release func()) {
	acc.mu.Lock()
	defer acc.mu.Unlock()
	acc.releases = append(acc.releases, release)
}

func (acc *answerAccount) release() {
	acc.mu.Lock()
	defer acc.mu.Unlock()
	for _, r := range acc.releases {
		r()
	}
	acc.releases = nil
}

// holdForAnswer keeps release until the request's answer is written, or
// calls it now when ctx has no account (a server driven in memory).
func holdForAnswer(ctx context.Context, release func()) {
	if acc, ok := ctx.Value(answerAccountKey{}).(*answerAccount); ok {
		acc.hold(release)
		return
	}
	release()
}

// chargeAnswer takes n bytes of the in-flight budget until the answer is
// written, waiting as a large request does (api.API.TakeInFlight); a
// small answer takes nothing, as a small request does not, so that it
// never queues behind a large send.
func (s *Server) chargeAnswer(ctx context.Context, n int64) error {
	release, err := s.take(ctx, n)
	if err != nil {
		return err
	}
	holdForAnswer(ctx, release)
	return nil
}

// fitPage keeps the first of items whose JSON fits in budget bytes (at
// least one) and says where the next page starts: offset plus what was
// kept, when the page was cut, was full (limit), or more remain; nil when
// it is the last. Each item is measured as it encodes, one at a time, so
// nothing larger than one item is built to find the cut. Items are
// measured HTML-escaped, as the SDK writes them (see wireSize).
func fitPage[T any](budget int64, items []T, offset, limit int, more bool) ([]T, *int) {
	var size int64 = pageEnvelope
	var cw countWriter
	enc := json.NewEncoder(&cw)
	kept := len(items)
	for i := range items {
		before := cw.n
		if err := enc.Encode(items[i]); err != nil {
			break // it fails again, and is answered, when the page is encoded
		}
		if size += cw.n - before; size > budget && i > 0 {
			kept = i
			break
		}
	}
	cut := kept < len(items)
	if kept == 0 || !(cut || kept >= limit || more) {
		return items, nil
	}
	next := offset + kept
	return items[:kept], &next
}

// countWriter counts what is written to it and keeps nothing.
type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}

// toolList is a list tool's result: a REST list page, with where the next
// one starts.
type toolList[T any] struct {
	Items      []T  `json:"items"`
	Count      int  `json:"count" jsonschema:"items in this page"`
	NextOffset *int `json:"next_offset" jsonschema:"pass it as offset to read the next page: this page was full (limit) or cut to fit one answer (8 MiB of JSON); null when it is the last"`
}

// pageOf is l as a tool answers it: cut to fit budget bytes.
func pageOf[T any](budget int64, l api.List[T], offset, limit int) toolList[T] {
	items, next := fitPage(budget, l.Items, offset, limit, false)
	return toolList[T]{Items: items, Count: len(items), NextOffset: next}
}
