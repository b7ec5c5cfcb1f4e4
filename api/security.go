package api

import (
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/api/admin"
)

// maxHeaderBytes bounds the request's header block (names, values and the
// request line). net/http's own, larger limit answers in plain text; this
// one answers in the API's JSON shape.
const maxHeaderBytes = 64 << 10

// securityHeaders sets the usual defensive headers on every response: the
// API serves JSON only, so nothing should be sniffed, framed, cached or
// leak a Referer. The dashboard's pages get their own (admin.SetHeaders).
func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		if admin.IsPath(c.Request().URL.Path) {
			h.Set("X-Frame-Options", "DENY")
			admin.SetHeaders(h)
			return next(c)
		}
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		return next(c)
	}
}

// checkRequest refuses what no handler should see: header blocks above
// maxHeaderBytes (431), a query that does not parse (422, see checkRawQuery),
// and a NUL or invalid UTF-8 in the path or the query (422). PostgreSQL refuses both in text, so an id or a search term with
// one was a 500 there and a 404 on SQLite; no id or term contains one.
func checkRequest(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		size := len(r.Method) + len(r.RequestURI) + len(r.Host)
		for k, vs := range r.Header {
			for _, v := range vs {
				size += len(k) + len(v) + 4
			}
		}
		if size > maxHeaderBytes {
			return newError(http.StatusRequestHeaderFieldsTooLarge, "headers_too_large",
				"Request header fields too large: the limit is 64 KB")
		}
		if err := checkText(r.URL.Path, "path"); err != nil {
			return err
		}
		if err := checkRawQuery(r.URL.RawQuery); err != nil {
			return err
		}
		for name, vs := range r.URL.Query() {
			if err := checkText(name, "query", name); err != nil {
				return err
			}
			for _, v := range vs {
				if err := checkText(v, "query", name); err != nil {
					return err
				}
			}
		}
		return next(c)
	}
}

// checkText refuses a path or query value PostgreSQL could not compare
// with text: one with a NUL, or that is not UTF-8 (a "%ff", or a surrogate
// "%ed%a0%80").
func checkText(s string, loc ...any) error {
	switch {
	case strings.IndexByte(s, 0) >= 0:
		return fieldError("NUL characters are not allowed", "value_error", loc...)
	case !utf8.ValidString(s):
		return fieldError("Input is not valid UTF-8", "value_error", loc...)
	}
	return nil
}

// requireJSON makes every request body JSON, declared as such. A browser
// can POST text/plain or a form to any site without a CORS preflight;
// accepting those as JSON would let any web page send mail through a
// server on the operator's machine or LAN. The providers' webhooks are
// exempt: SNS posts text/plain, and a webhook is authenticated by its
// provider's signature over the body, which no web page can make.
func requireJSON(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		ct := r.Header.Get(echo.HeaderContentType)
		switch {
		case strings.HasPrefix(r.URL.Path, "/webhooks/"):
			return next(c)
		case admin.IsPath(r.URL.Path):
			return next(c) // the dashboard's forms; it checks their origin itself
		case r.ContentLength == 0 && ct == "":
			return next(c) // nothing to misread; a POST without a body is a 422 further on
		case r.ContentLength == 0 && (r.Method == http.MethodGet || r.Method == http.MethodHead ||
			r.Method == http.MethodDelete || r.Method == http.MethodOptions):
			return next(c) // no body: whatever Content-Type a client habitually sends is harmless
		}
		mt, params, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" ||
			(params["charset"] != "" && !strings.EqualFold(params["charset"], "utf-8")) {
			return newError(http.StatusUnsupportedMediaType, "unsupported_media_type",
				"Content-Type must be application/json")
		}
		return next(c)
	}
}

// crossSite refuses state-changing requests that a browser made on behalf
// of another site which CORS_ORIGINS does not allow. Non-browser clients
// send neither Origin nor Sec-Fetch-Site and are not affected. The
// dashboard applies its own, stricter rule (same origin only), whatever
// CORS_ORIGINS says.
func (a *API) crossSite(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			return next(c)
		}
		if admin.IsPath(r.URL.Path) {
			return next(c)
		}
		origin := r.Header.Get(echo.HeaderOrigin)
		site := r.Header.Get("Sec-Fetch-Site")
		if origin == "" && site != "cross-site" && site != "same-site" {
			return next(c)
		}
		if origin != "" && (a.originAllowed(origin) || sameOrigin(origin, r.Host)) {
			return next(c)
		}
		if origin == "" && site == "same-site" {
			return next(c) // same registrable domain without an Origin: not a browser POST
		}
		return newError(http.StatusForbidden, "cross_site_forbidden",
			"Cross-site request refused: add the origin to CORS_ORIGINS to allow it")
	}
}

func (a *API) originAllowed(origin string) bool {
	return slices.Contains(a.CORSOrigins, "*") || slices.Contains(a.CORSOrigins, origin)
}

// sameOrigin reports whether origin names the host the request was sent to.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, host)
}
