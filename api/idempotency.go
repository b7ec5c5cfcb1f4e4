package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/store"
)

// Idempotency-Key rules: what API.md promises, kept for KeyTTL.
const (
	// KeyTTL is how long a key is remembered.
	KeyTTL = 24 * time.Hour
	// maxKeyLen bounds a key, as API.md states.
	maxKeyLen = 255
)

// readIdempotencyKey validates the Idempotency-Key header, if any, and
// returns it with a hash of the raw request body, which a reuse of the key
// must match. The body is put back for the binder.
func (a *API) readIdempotencyKey(c echo.Context) (key, hash string, err error) {
	key = c.Request().Header.Get("Idempotency-Key")
	if key == "" {
		return "", "", nil
	}
	if !ValidIdempotencyKey(key) {
		return "", "", newError(http.StatusUnprocessableEntity, "invalid_idempotency_key",
			"Idempotency-Key must be 1 to 255 printable ASCII characters")
	}
	raw, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return "", "", err
	}
	c.Request().Body = io.NopCloser(bytes.NewReader(raw))
	sum := sha256.Sum256(raw)
	return key, hex.EncodeToString(sum[:]), nil
}

// ValidIdempotencyKey reports whether k, if not empty, may be an
// idempotency key: at most maxKeyLen printable ASCII characters.
func ValidIdempotencyKey(k string) bool {
	if len(k) > maxKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// onceUnderKey runs a send under an Idempotency-Key. The key is claimed
// durably before the send (a unique row), so of concurrent requests with one
// key exactly one sends; the others get 409 while it is in flight and its
// response afterwards. Only a send that was recorded (201, sent or failed)
// is remembered (201, or 202 held): a refusal (429, 403, 404) or an error gives the key back,
// so the client's retry is a new attempt, as a client retrying on 429 needs.
// An answer decided here, without the pipeline, names req.Inbox for its
// windows.
func (a *API) onceUnderKey(ctx context.Context, req skuld.SendRequest, key, hash string) (SendAnswer, error) {
	now := a.Clock.Now()
	claim := &store.IdempotencyKey{Key: key, RequestHash: hash, Owner: a.instance,
		MessageID: uuid.NewString(), CreatedAt: now}
	decided := SendAnswer{Inbox: req.Inbox}
	for range 2 {
		held, err := a.Store.ClaimIdempotencyKey(ctx, claim, now.Add(-KeyTTL))
		if err != nil {
			return decided, err
		}
		if held == nil {
			break
		}
		switch {
		case held.RequestHash != hash:
			return decided, newError(http.StatusUnprocessableEntity, "idempotency_key_reused",
				"Idempotency-Key was already used with a different request")
		case held.StatusCode != nil:
			decided.Status, decided.Body, decided.Replayed = *held.StatusCode, []byte(deref(held.ResponseBody)), true
			return decided, nil
		case held.Owner == a.instance || now.Sub(held.CreatedAt) < a.KeyLease:
			return decided, newError(http.StatusConflict, "idempotency_key_in_flight",
				"A request with this Idempotency-Key is still in progress; retry shortly")
		}
		// Claimed by a server process that stopped before answering. If
		// its send was recorded, that is the answer; if not, nothing was
		// sent and the key is free again.
		m, err := a.Store.Message(ctx, held.MessageID)
		if err == nil {
			decided.Status, decided.Replayed = statusOf(m), true
			decided.Body, err = a.completeKey(ctx, key, decided.Status, responseOf(m))
			return decided, err
		}
		if !errors.Is(err, store.ErrNotFound) {
			return decided, err
		}
		if err := a.Store.ReleaseIdempotencyKey(ctx, key, held.Owner); err != nil {
			return decided, err
		}
	}

	req.MessageID = claim.MessageID
	res, err := a.Sender.Send(ctx, req)
	if err != nil {
		if rerr := a.Store.ReleaseIdempotencyKey(context.WithoutCancel(ctx), key, a.instance); rerr != nil {
			a.logger.ErrorContext(ctx, "release idempotency key", slog.Any("error", rerr))
		}
		return SendAnswer{Inbox: res.Inbox}, err
	}
	body, err := a.completeKey(context.WithoutCancel(ctx), key, statusOf(res.Message), responseOf(res.Message))
	if err != nil {
		// The message was sent and recorded; the key stays in flight and
		// resolves to that message at the next start.
		a.logger.ErrorContext(ctx, "complete idempotency key", slog.String("message_id", res.Message.ID), slog.Any("error", err))
		body, err = encodeJSON(responseOf(res.Message))
	}
	return answerOf(res, body), err
}

// completeKey stores the response to replay for key, with its status
// (201 sent, 202 held), and returns its body.
func (a *API) completeKey(ctx context.Context, key string, status int, res sendResponse) ([]byte, error) {
	body, err := encodeJSON(res)
	if err != nil {
		return nil, err
	}
	return body, a.Store.CompleteIdempotencyKey(ctx, key, status, string(body))
}

// encodeJSON is the JSON of a response as the API writes it.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// deref is *p, or T's zero value for nil.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
