package api

import (
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
)

// corsExposedHeaders are the response headers a page of an allowed origin
// may read: every header the OpenAPI document gives a response (a test
// keeps the two in step). Without them a browser dashboard could not see
// a 429's Retry-After, a replay's Idempotent-Replayed, the request id or
// the name of an attachment it downloads.
var corsExposedHeaders = []string{
	"Retry-After", echo.HeaderXRequestID, "Idempotent-Replayed", echo.HeaderWWWAuthenticate,
	"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "X-RateLimit-Unit", "RateLimit", "RateLimit-Policy",
	echo.HeaderContentDisposition, // a downloaded attachment's file name
	"Preference-Applied",          // a send answered at once (Prefer: respond-async)
}

// cors answers the CORS_ORIGINS' preflights and marks their responses.
// AllowMethods is left empty on purpose: echo then answers a preflight
// with the methods the router serves on that path (its Allow header), so
// every method a route uses (PATCH /v1/inboxes/{id} included) is allowed
// as soon as the route exists, and no other.
func cors(origins []string) echo.MiddlewareFunc {
	return middleware.CORSWithConfig(middleware.CORSConfig{
		AllowOrigins: origins,
		// MCP-Protocol-Version: an MCP client in a page of an allowed
		// origin sends it on every request after initialize.
		AllowHeaders: []string{echo.HeaderContentType, echo.HeaderAuthorization, "X-API-Key",
			"Idempotency-Key", echo.HeaderXRequestID, "MCP-Protocol-Version", "Prefer"},
		ExposeHeaders: corsExposedHeaders,
	})
}
