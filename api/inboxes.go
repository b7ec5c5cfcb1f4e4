package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/store"
)

// Pagination bounds shared by every list endpoint.
const (
	defaultLimit = 50
	maxLimit     = 500
)

func (a *API) createInbox(c echo.Context) error {
	obj, err := decodeBody(c.Request().Body)
	if err != nil {
		return err
	}
	obj.forbidExtra("name", "email_username")
	name := obj.str("name", true, 1, 255)
	username := obj.str("email_username", true, 1, 64)
	// The name is the From's display name: it must fit in a header and
	// must not carry an address of its own.
	if err := address.CheckName(name); err != nil {
		obj.add("name", "Invalid inbox name: "+err.Error(), "value_error")
	}
	if err := obj.err(); err != nil {
		return err
	}
	if a.EmailDomain == "" {
		return newError(http.StatusUnprocessableEntity, "email_domain_not_configured",
			"EMAIL_DOMAIN is not configured; set it to create inboxes")
	}
	addr := strings.ToLower(strings.TrimSpace(username)) + "@" + a.EmailDomain
	if parsed, perr := mail.ParseAddress(addr); perr != nil || parsed.Address != addr || strings.Count(addr, "@") != 1 {
		return fieldError("Invalid email username: "+username, "value_error", "body", "email_username")
	}
	now := a.Clock.Now().UTC()
	in := &store.Inbox{ID: uuid.NewString(), EmailAddress: addr, Name: name, CreatedAt: now, UpdatedAt: now}
	err = a.Store.CreateInbox(c.Request().Context(), in)
	if errors.Is(err, store.ErrConflict) {
		return newError(http.StatusConflict, "conflict", fmt.Sprintf("Inbox with email %s already exists", addr))
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, toInbox(in))
}

func (a *API) listInboxes(c echo.Context) error {
	limit, offset, err := pagination(c)
	if err != nil {
		return err
	}
	inboxes, err := a.Store.Inboxes(c.Request().Context(), limit, offset)
	if err != nil {
		return err
	}
	out := list[inboxResponse]{Items: make([]inboxResponse, len(inboxes)), Count: len(inboxes)}
	for i := range inboxes {
		out.Items[i] = toInbox(&inboxes[i])
	}
	return c.JSON(http.StatusOK, out)
}

func (a *API) getInbox(c echo.Context) error {
	in, err := a.inbox(c, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toInbox(in))
}

func (a *API) deleteInbox(c echo.Context) error {
	id := c.Param("id")
	err := a.Store.DeleteInbox(c.Request().Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return notFound(fmt.Sprintf("Inbox %s not found", id))
	}
	if err != nil {
		return err
	}
	if err := a.Limiter.InboxesChanged(c.Request().Context()); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// inbox loads an inbox, mapping absence to the contract's 404 sentence.
func (a *API) inbox(c echo.Context, id string) (*store.Inbox, error) {
	in, err := a.Store.Inbox(c.Request().Context(), id)
	return found(in, err, id)
}

// cachedInbox is inbox for a send (store.Store.CachedInbox).
func (a *API) cachedInbox(c echo.Context, id string) (*store.Inbox, error) {
	in, err := a.Store.CachedInbox(c.Request().Context(), id)
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
	if limit, err = queryInt(c.QueryParam("limit"), "limit", defaultLimit, 1, maxLimit); err != nil {
		return 0, 0, err
	}
	offset, err = queryInt(c.QueryParam("offset"), "offset", 0, 0, 1<<31-1)
	return limit, offset, err
}
