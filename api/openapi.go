package api

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

// OpenAPIDocument is the API's OpenAPI 3.1 description, written by hand
// next to the handlers it describes; tests fail when it and the routes
// disagree, and the end-to-end tests validate real responses against it.
//
//go:embed openapi.json
var OpenAPIDocument []byte

func (a *API) openAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, OpenAPIDocument)
}
