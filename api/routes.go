package api

import "github.com/labstack/echo/v4"

// routes is the whole API in one place.
func (a *API) routes(e *echo.Echo) {
	e.GET("/health", a.health)
	e.HEAD("/health", a.health) // uptime checkers use HEAD
	e.GET("/ready", a.ready)
	e.HEAD("/ready", a.ready)
	e.GET("/metrics", a.metrics)
	e.GET("/openapi.json", a.openAPI)
	e.GET("/docs", a.docs)

	// The key check is attached to each route rather than to the group:
	// echo gives a group with middleware a catch-all route, which would turn
	// "405 Method Not Allowed" into 404 under /v1.
	v1, auth := e.Group("/v1"), a.requireAPIKey
	v1.POST("/inboxes", a.createInbox, auth)
	v1.GET("/inboxes", a.listInboxes, auth)
	v1.GET("/inboxes/:id", a.getInbox, auth)
	v1.DELETE("/inboxes/:id", a.deleteInbox, auth)

	v1.GET("/threads", a.listThreads, auth)
	v1.GET("/threads/:id", a.getThread, auth)

	v1.GET("/messages", a.listMessages, auth)
	v1.GET("/messages/:id", a.getMessage, auth)
	v1.POST("/messages", a.sendMessage, auth)

	v1.GET("/rate-limit", a.rateLimit, auth)
	v1.POST("/search", a.search, auth)
}
