// Package admin is the dashboard under /admin: server-rendered, read-only
// pages (html/template) and their stylesheet, embedded in the binary. It
// renders what the api package reads for it (Options.Overview, Messages,
// Message, Held, Suppressions, Webhooks) and keeps the dashboard's
// sessions; it reads neither the database nor the throttle itself.
package admin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"html/template"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

//go:embed templates/*.html admin.css icon.svg htmx/htmx.min.js
var files embed.FS

// CSP is the policy of every /admin response: scripts (htmx), styles and
// images from this server only, and nothing inline nor evaluated; requests
// from a script (htmx's refresh of the throttle windows) and forms only to
// this server; no framing.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// cookieName is the session cookie, scoped to Path=/admin.
const cookieName = "nornweave_admin"

// Options configures the dashboard.
type Options struct {
	// APIKey, when set, is what the login form takes; empty: the pages
	// are open, as the API is.
	APIKey string
	// ServerKey signs the session cookies: store.ServerKeyFor's
	// "admin-session", shared by every server on the database. Nil: a
	// random key, so sessions last as long as this process.
	ServerKey []byte
	// SessionTTL is ADMIN_SESSION_TTL; 0 means 12 h.
	SessionTTL time.Duration
	// Now is the time; nil: time.Now.
	Now func() time.Time
	// Blocked reports whether r's client is locked out by its failed keys,
	// and for how long; Failed counts (and logs) one more failure of it.
	// They are the API's lockout (AUTH_FAILURE_LIMIT); nil: none.
	Blocked func(r *http.Request) (bool, time.Duration)
	Failed  func(r *http.Request)
	// Secure reports whether r came over TLS (directly, or through a
	// trusted proxy); nil: r.TLS != nil.
	Secure func(r *http.Request) bool
	// Overview reads what the overview shows; Windows, its throttle
	// windows alone (Global, Inboxes and At), for their refresh every
	// 2 s. Nil Windows: Overview.
	Overview func(ctx context.Context) (Overview, error)
	Windows  func(ctx context.Context) (Overview, error)
	// Held, Suppressions and Webhooks read what their pages show; nil:
	// the page shows none.
	Held         HeldFunc
	Suppressions SuppressionsFunc
	Webhooks     WebhooksFunc
	// Messages and Message read the Messages pages; nil: none.
	Messages MessagesFunc
	Message  MessageFunc
	// Revoke records that session id (hex), valid until exp, was logged
	// out, and Revoked asks whether it was: the database's admin_logouts,
	// so that a logout holds on every server and across restarts. A
	// second Revoke of an id is not an error. Nil: a logout only clears
	// the browser's cookie, and a copy of it works until it expires.
	Revoke  func(ctx context.Context, id string, exp time.Time) error
	Revoked func(ctx context.Context, id string) (bool, error)
	// Logger logs what fails on the way to an answer that hides it: a
	// session that could not be checked, a logout not recorded. Nil: none.
	Logger *slog.Logger
}

// Handler serves the dashboard's routes; api/routes.go names them. It is
// safe for concurrent use.
type Handler struct {
	o        Options
	apiKey   [sha256.Size]byte
	sessions *sessions
	pages    *template.Template
	css      []byte
	icon     []byte
	htmx     []byte
}

// New returns the dashboard's handler.
func New(o Options) *Handler {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 12 * time.Hour
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Secure == nil {
		o.Secure = func(r *http.Request) bool { return r.TLS != nil }
	}
	if o.ServerKey == nil {
		o.ServerKey = make([]byte, 32)
		if _, err := rand.Read(o.ServerKey); err != nil {
			panic("admin: no randomness: " + err.Error())
		}
	}
	css, err := files.ReadFile("admin.css")
	if err != nil {
		panic("admin: embedded stylesheet: " + err.Error()) // the binary was built without it
	}
	icon, err := files.ReadFile("icon.svg")
	if err != nil {
		panic("admin: embedded icon: " + err.Error())
	}
	htmx, err := files.ReadFile("htmx/htmx.min.js")
	if err != nil {
		panic("admin: embedded htmx: " + err.Error())
	}
	return &Handler{o: o, icon: icon, htmx: htmx, apiKey: sha256.Sum256([]byte(o.APIKey)),
		sessions: newSessions(o.ServerKey, o.APIKey),
		pages:    template.Must(template.New("").Funcs(funcs).ParseFS(files, "templates/*.html")), css: css}
}

// Register adds the dashboard's routes to e: the pages behind
// RequireSession, their stylesheet, script and icon, and the login and
// logout forms.
func (h *Handler) Register(e *echo.Echo) {
	e.GET("/admin", h.ShowOverview, h.RequireSession)
	e.GET("/admin/windows", h.ShowWindows, h.RequireSession)
	e.GET("/admin/messages", h.ShowMessages, h.RequireSession)
	e.GET("/admin/messages/:id", h.ShowMessage, h.RequireSession)
	e.GET("/admin/held", h.ShowHeld, h.RequireSession)
	e.GET("/admin/suppressions", h.ShowSuppressions, h.RequireSession)
	e.GET("/admin/webhooks", h.ShowWebhooks, h.RequireSession)
	e.GET("/admin/admin.css", h.Stylesheet)
	e.GET("/admin/htmx.min.js", h.Script)
	e.GET("/admin/icon.svg", h.Icon)
	e.GET("/admin/login", h.LoginForm)
	e.POST("/admin/login", h.Login)
	e.POST("/admin/logout", h.Logout)
}

// IsPath reports whether path is the dashboard's.
func IsPath(path string) bool { return path == "/admin" || strings.HasPrefix(path, "/admin/") }

// SetHeaders sets the headers of every /admin response, whatever its
// status: the CSP, no sniffing, no caching, a Referer only to this site.
func SetHeaders(h http.Header) {
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// Stylesheet serves admin.css.
func (h *Handler) Stylesheet(c echo.Context) error {
	return c.Blob(http.StatusOK, "text/css; charset=utf-8", h.css)
}

// Icon serves icon.svg, the pages' favicon: without one the browser asks
// for /favicon.ico, and logs the 404.
func (h *Handler) Icon(c echo.Context) error {
	return c.Blob(http.StatusOK, "image/svg+xml", h.icon)
}

// Script serves htmx.min.js, vendored by scripts/vendor-htmx.sh.
func (h *Handler) Script(c echo.Context) error {
	return c.Blob(http.StatusOK, "text/javascript; charset=utf-8", h.htmx)
}

// RequireSession sends a browser without a valid session to the login
// form, when API_KEY is set. A request from htmx (HX-Request: true) gets
// 401 and HX-Redirect instead of the 303: htmx would follow a 303 itself
// and swap the login form into the page; HX-Redirect makes it navigate.
func (h *Handler) RequireSession(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if h.o.APIKey != "" && !h.loggedIn(c.Request()) {
			if c.Request().Header.Get("HX-Request") == "true" {
				c.Response().Header().Set("HX-Redirect", "/admin/login")
				return c.NoContent(http.StatusUnauthorized)
			}
			return c.Redirect(http.StatusSeeOther, "/admin/login")
		}
		return next(c)
	}
}

func (h *Handler) loggedIn(r *http.Request) bool {
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return false
	}
	id, _, err := h.sessions.check(ck.Value, h.o.Now())
	if err != nil || h.o.Revoked == nil {
		return err == nil
	}
	// A database that cannot say fails closed: the login form, not the
	// pages, and the cause in the log.
	gone, err := h.o.Revoked(r.Context(), id)
	if err != nil {
		h.o.Logger.ErrorContext(r.Context(), "admin session not checked: logouts unreadable", slog.Any("error", err))
		return false
	}
	return !gone
}

// loginPage is what the login form shows.
type loginPage struct {
	Title string
	Error string
}

// LoginForm serves the login form; without API_KEY there is nothing to
// log in to.
func (h *Handler) LoginForm(c echo.Context) error {
	if h.o.APIKey == "" {
		return c.Redirect(http.StatusSeeOther, "/admin")
	}
	return h.render(c, http.StatusOK, "login", loginPage{Title: "Log in"})
}

// Login checks the form's api_key: a good key starts a session (303 to the
// overview), a wrong one counts toward the API's lockout (the form again,
// with its error, as a 200: a 401 must carry a WWW-Authenticate challenge,
// which a form login has none of), and a client locked out gets 429 with
// Retry-After whatever it sends.
func (h *Handler) Login(c echo.Context) error {
	r := c.Request()
	if !sameOrigin(r) {
		return h.render(c, http.StatusForbidden, "login", loginPage{Title: "Log in",
			Error: "Cross-site login refused."})
	}
	if h.o.APIKey == "" {
		return c.Redirect(http.StatusSeeOther, "/admin")
	}
	if h.o.Blocked != nil {
		if blocked, wait := h.o.Blocked(r); blocked {
			c.Response().Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
			return h.render(c, http.StatusTooManyRequests, "login", loginPage{Title: "Log in",
				Error: "Too many failed attempts from this address; try again later."})
		}
	}
	got := sha256.Sum256([]byte(c.FormValue("api_key")))
	if subtle.ConstantTimeCompare(got[:], h.apiKey[:]) != 1 {
		if h.o.Failed != nil {
			h.o.Failed(r)
		}
		return h.render(c, http.StatusOK, "login", loginPage{Title: "Log in", Error: "Wrong key."})
	}
	exp := h.o.Now().Add(h.o.SessionTTL)
	v, err := h.sessions.issue(exp)
	if err != nil {
		return err
	}
	c.SetCookie(h.cookie(r, v, exp))
	return c.Redirect(http.StatusSeeOther, "/admin")
}

// Logout ends the session of the cookie, if any (Options.Revoke), and
// clears the cookie. A logout that could not be recorded is logged, and
// the cookie cleared all the same: the browser is logged out, though a
// copy of its cookie would work until it expires.
func (h *Handler) Logout(c echo.Context) error {
	r := c.Request()
	if !sameOrigin(r) {
		return echo.NewHTTPError(http.StatusForbidden, "Cross-site logout refused")
	}
	if ck, err := r.Cookie(cookieName); err == nil && h.o.Revoke != nil {
		if id, exp, err := h.sessions.check(ck.Value, h.o.Now()); err == nil {
			if err := h.o.Revoke(r.Context(), id, exp); err != nil {
				h.o.Logger.ErrorContext(r.Context(), "admin logout not recorded: a copy of the cookie works until it expires",
					slog.Time("expires", exp), slog.Any("error", err))
			}
		}
	}
	gone := h.cookie(r, "", time.Unix(0, 0))
	gone.MaxAge = -1
	c.SetCookie(gone)
	return c.Redirect(http.StatusSeeOther, "/admin/login")
}

func (h *Handler) cookie(r *http.Request, v string, exp time.Time) *http.Cookie {
	return &http.Cookie{Name: cookieName, Value: v, Path: "/admin", Expires: exp,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: h.o.Secure(r)}
}

// render writes page name with data.
func (h *Handler) render(c echo.Context, status int, name string, data any) error {
	var b strings.Builder
	if err := h.pages.ExecuteTemplate(&b, name, data); err != nil {
		return err
	}
	return c.HTMLBlob(status, []byte(b.String()))
}
