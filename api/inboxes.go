package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/store"
)

// Pagination bounds shared by every list endpoint.
const (
	DefaultLimit = 50
	MaxLimit     = 500
)

func (a *API) createInbox(c echo.Context) error {
	obj, err := decodeBody(c.Request().Body)
	if err != nil {
		return err
	}
	in, err := a.addInbox(c.Request().Context(), obj)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, toInbox(in))
}

// addInbox reads a new inbox's name and email_username from obj and
// creates it: what POST /v1/inboxes and the create_inbox tool both do.
func (a *API) addInbox(ctx context.Context, obj object) (*store.Inbox, error) {
	obj.forbidExtra("name", "email_username")
	name := obj.inboxName()
	username := obj.str("email_username", true, 1, 64)
	local := strings.ToLower(strings.TrimSpace(username))
	// The inbox's address is a From and a Reply-To: held to the rule of
	// the addresses we send to (ASCII dot-atom, no '%' or '!').
	if _, ok := obj.present("email_username"); ok && address.CheckLocal(local) != nil {
		obj.add("email_username", "Invalid email username: "+username+" ("+address.ErrLocal.Error()+")", "value_error")
	}
	if err := obj.err(); err != nil {
		return nil, err
	}
	if a.EmailDomain == "" {
		return nil, newError(http.StatusUnprocessableEntity, "email_domain_not_configured",
			"EMAIL_DOMAIN is not configured; set it to create inboxes")
	}
	addr := local + "@" + a.EmailDomain
	now := a.Clock.Now().UTC()
	in := &store.Inbox{ID: uuid.NewString(), EmailAddress: addr, Name: name, CreatedAt: now, UpdatedAt: now}
	err := a.Store.CreateInbox(ctx, in)
	if errors.Is(err, store.ErrConflict) {
		return nil, newError(http.StatusConflict, "conflict", fmt.Sprintf("Inbox with email %s already exists", addr))
	}
	if err != nil {
		return nil, err
	}
	return in, nil
}

func (a *API) listInboxes(c echo.Context) error {
	limit, offset, err := pagination(c)
	if err != nil {
		return err
	}
	out, err := a.Inboxes(c.Request().Context(), limit, offset)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// Inboxes is a page of the inboxes, ordered by address.
func (a *API) Inboxes(ctx context.Context, limit, offset int) (List[InboxResponse], error) {
	inboxes, err := a.Store.Inboxes(ctx, limit, offset)
	if err != nil {
		return List[InboxResponse]{}, err
	}
	out := List[InboxResponse]{Items: make([]InboxResponse, len(inboxes)), Count: len(inboxes)}
	for i := range inboxes {
		out.Items[i] = toInbox(&inboxes[i])
	}
	return out, nil
}

func (a *API) getInbox(c echo.Context) error {
	in, err := a.inbox(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toInbox(in))
}

// maxInboxName bounds an inbox's name, in characters.
const maxInboxName = 255

// inboxName reads and checks the "name" of an inbox: the display name of
// every message the inbox sends. It is the one rule for it: POST and PATCH
// both read the name here, so nothing refused at creation can be set
// later. The name must fit in a header and must not read as an address of
// its own (address.CheckName).
func (o object) inboxName() string {
	if raw, sent := o.fields[o.key("name")]; sent && string(raw) == "null" {
		o.add("name", "Input should be a valid string", "string_type")
		return ""
	}
	name := o.str("name", true, 1, maxInboxName)
	if _, ok := o.present("name"); ok {
		if err := address.CheckName(name); err != nil {
			o.add("name", "Invalid inbox name: "+err.Error(), "value_error")
		}
	}
	return name
}

// inbox loads an inbox, mapping absence to the contract's 404 sentence.
func (a *API) inbox(ctx context.Context, id string) (*store.Inbox, error) {
	in, err := a.Store.Inbox(ctx, id)
	return found(in, err, id)
}

func found(in *store.Inbox, err error, id string) (*store.Inbox, error) {
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound(fmt.Sprintf("Inbox %s not found", id))
	}
	return in, err
}

// pagination reads limit and offset from the query string.
func pagination(c echo.Context) (limit, offset int, err error) {
	if limit, err = queryInt(c.QueryParam("limit"), "limit", DefaultLimit, 1, MaxLimit); err != nil {
		return 0, 0, err
	}
	offset, err = queryInt(c.QueryParam("offset"), "offset", 0, 0, 1<<31-1)
	return limit, offset, err
}
