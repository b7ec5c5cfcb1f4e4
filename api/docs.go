package api

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
)

// docsFiles is the /docs page: index.html and init.js, written here, and
// Swagger UI's files under swagger-ui/, vendored from the npm registry by
// scripts/vendor-swagger-ui.sh (pinned version and integrity). Embedded,
// so the page works offline and the build needs no npm.
//
//go:embed docs
var docsFiles embed.FS

// docsCSP is the policy of /docs and its files, exact: scripts, styles,
// images and fonts from this server only (no inline script or style, no
// eval), data: images (Swagger UI's icons are SVG data URIs in its CSS),
// and calls ("try it", /openapi.json) to this server only. The API routes
// keep default-src 'none'.
const docsCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// docsFile is one file of the page, ready to serve.
type docsFile struct {
	body        []byte
	contentType string
	etag        string
}

// loadDocsFiles indexes the embedded files by the name they are served
// under: /docs is index.html, /docs/<name> every other file, whichever
// directory it is in.
func loadDocsFiles() (map[string]docsFile, error) {
	files := map[string]docsFile{}
	err := fs.WalkDir(docsFiles, "docs", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := docsFiles.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		files[path.Base(p)] = docsFile{body: b, contentType: docsContentType(p),
			etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	return files, err
}

func docsContentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return echo.MIMETextHTMLCharsetUTF8
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".png":
		return "image/png"
	}
	return echo.MIMETextPlainCharsetUTF8 // LICENSE, NOTICE, VERSION, *.txt
}

// docs serves the API reference page; HEAD answers as GET without the body.
func (a *API) docs(c echo.Context) error { return a.serveDocsFile(c, "index.html") }

// docsAsset serves a file of the page: Swagger UI's script and styles,
// init.js, the icon, the licenses.
func (a *API) docsAsset(c echo.Context) error {
	name := c.Param("asset")
	if name == "index.html" {
		return echo.ErrNotFound // the page is /docs
	}
	return a.serveDocsFile(c, name)
}

// serveDocsFile writes a file with its own CSP. The files change only with
// the binary: the ETag (their hash) lets a browser revalidate with a 304
// instead of fetching Swagger UI's 1.7 MB again.
func (a *API) serveDocsFile(c echo.Context, name string) error {
	f, ok := a.docsFiles[name]
	if !ok {
		return echo.ErrNotFound
	}
	h := c.Response().Header()
	h.Set("Content-Security-Policy", docsCSP)
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", f.etag)
	if etagMatches(c.Request().Header.Get("If-None-Match"), f.etag) {
		return c.NoContent(http.StatusNotModified)
	}
	h.Set(echo.HeaderContentLength, strconv.Itoa(len(f.body)))
	return c.Blob(http.StatusOK, f.contentType, f.body)
}

// etagMatches reports whether an If-None-Match header names etag (or is *).
func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}
