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
	e.HEAD("/docs", a.docs)
	e.GET("/docs/:asset", a.docsAsset)
	e.HEAD("/docs/:asset", a.docsAsset)

	// The dashboard (api/admin): HTML, behind a session cookie when
	// API_KEY is set; its login takes the key.
	a.admin.Register(e)

	// The API key is checked by middleware for every /v1 path (see
	// middleware): echo gives a group with middleware a catch-all route,
	// which would turn "405 Method Not Allowed" into 404 under /v1.
	v1 := e.Group("/v1")
	v1.POST("/inboxes", a.createInbox)
	v1.GET("/inboxes", a.listInboxes)
	v1.GET("/inboxes/:id", a.getInbox)
	v1.PATCH("/inboxes/:id", a.patchInbox)
	v1.DELETE("/inboxes/:id", a.deleteInbox)
	v1.GET("/inboxes/:id/rate-limit", a.inboxRateLimit)

	v1.GET("/threads", a.listThreads)
	v1.GET("/threads/:id", a.getThread)

	v1.GET("/messages", a.listMessages)
	v1.GET("/messages/:id", a.getMessage)
	v1.POST("/messages", a.postMessage)
	v1.PATCH("/messages/:id", a.patchMessage)
	v1.POST("/messages/:id/cancel", a.cancelMessage)
	v1.GET("/messages/:id/events", a.listMessageEvents)

	v1.GET("/suppressions", a.listSuppressions)
	v1.POST("/suppressions", a.createSuppression)
	v1.DELETE("/suppressions/:email", a.deleteSuppression)

	v1.POST("/webhooks", a.createWebhook)
	v1.GET("/webhooks", a.listWebhooks)
	v1.GET("/webhooks/:id", a.getWebhook)
	v1.PATCH("/webhooks/:id", a.updateWebhook)
	v1.DELETE("/webhooks/:id", a.deleteWebhook)
	v1.POST("/webhooks/:id/rotate-secret", a.rotateWebhookSecret)
	v1.GET("/webhooks/:id/deliveries", a.listWebhookDeliveries)
	v1.POST("/webhooks/:id/deliveries/:delivery_id/replay", a.replayWebhookDelivery)

	v1.GET("/attachments", a.listAttachments)
	v1.GET("/attachments/:id", a.getAttachment)
	v1.GET("/attachments/:id/content", a.getAttachmentContent)

	v1.GET("/rate-limit", a.rateLimit)
	v1.POST("/search", a.search)

	// Providers' delivery events: signed by the provider, not behind the
	// API key.
	e.POST("/webhooks/:provider", a.receiveWebhook)

	// MCP (api/mcp): streamable HTTP, stateless, so POST only; GET (a
	// server-to-client stream) is 405, as the transport allows. Behind the
	// API key like /v1.
	if a.MCP != nil {
		e.POST("/mcp", a.MCP(a))
	}
}
