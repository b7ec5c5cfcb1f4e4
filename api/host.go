package api

import (
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
)

// HostPolicy is the allow-list of the Host a request may be addressed to.
// Without an API key, a web page on a name its owner points at 127.0.0.1
// (DNS rebinding) is, to the browser, the same origin as this server: it
// could send mail and read every message. Such a request carries the
// page's name in its Host header, so a server that answers only for its
// own names cannot be reached that way.
//
// Allowed: "localhost" and names under ".localhost" (browsers resolve
// them to loopback themselves), loopback addresses (127.0.0.0/8, ::1), and
// the configured names: exact host names or addresses, "*.example.com" for
// every name under example.com, ".example.com" for example.com and every
// name under it, "*" for any host. Ports are ignored, and so is case and a
// trailing dot. A HostPolicy is immutable and safe for concurrent use.
type HostPolicy struct {
	any      bool
	exact    map[string]bool
	suffixes []string // ".example.com"
}

// NewHostPolicy returns the policy allowing loopback and allowed (the
// items of ALLOWED_HOSTS, see config.Config.AllowedHostList).
func NewHostPolicy(allowed []string) *HostPolicy {
	p := &HostPolicy{exact: map[string]bool{}}
	for _, h := range allowed {
		h = strings.ToLower(strings.TrimSpace(h))
		switch {
		case h == "*":
			p.any = true
		case strings.HasPrefix(h, "*."):
			p.suffixes = append(p.suffixes, h[1:])
		case strings.HasPrefix(h, "."):
			p.exact[h[1:]] = true
			p.suffixes = append(p.suffixes, h)
		case h != "":
			p.exact[canonicalHost(h)] = true
		}
	}
	return p
}

// Allows reports whether a request whose Host header is host may be served.
func (p *HostPolicy) Allows(host string) bool {
	if p.any {
		return true
	}
	h := canonicalHost(host)
	if h == "" {
		return false // HTTP/1.1 requires a Host; a browser always sends one
	}
	if ip, err := netip.ParseAddr(h); err == nil && ip.Unmap().IsLoopback() {
		return true
	}
	if h == "localhost" || strings.HasSuffix(h, ".localhost") || p.exact[h] {
		return true
	}
	for _, s := range p.suffixes {
		if strings.HasSuffix(h, s) {
			return true
		}
	}
	return false
}

// canonicalHost is host without its port, brackets and trailing dot, in
// lower case; an IP address in its canonical form.
func canonicalHost(host string) string {
	h := strings.ToLower(strings.TrimSpace(host))
	if hp, _, err := net.SplitHostPort(h); err == nil {
		h = hp
	}
	h = strings.TrimSuffix(strings.Trim(h, "[]"), ".")
	if ip, err := netip.ParseAddr(h); err == nil {
		return ip.Unmap().String()
	}
	return h
}

// hostRefused is the answer to a request for a host the policy refuses:
// 421 Misdirected Request ("not this server's name"), in the API's shape.
func hostRefused(host string) *apiError {
	if len(host) > 100 {
		host = host[:100] + "..."
	}
	return newError(http.StatusMisdirectedRequest, "host_not_allowed",
		"Host "+strconv.Quote(host)+" is not served here; add it to ALLOWED_HOSTS to allow it")
}

// probePaths answer on any Host: a container or load balancer probes a
// server by its address (Kubernetes sends the pod's IP as Host), and they
// answer status words only, touching nothing an attacker could use.
var probePaths = map[string]bool{"/health": true, "/ready": true}

// checkHost refuses, before any handler, a request addressed to a host the
// policy does not allow; probes are exempt (probePaths).
func (a *API) checkHost(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if probePaths[r.URL.Path] && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			return next(c)
		}
		if !a.hosts.Allows(r.Host) {
			return hostRefused(r.Host)
		}
		return next(c)
	}
}

// Wrap applies the policy to a handler served outside the API's router
// (an endpoint mounted beside it, such as MCP's): a refused request gets the
// same 421 JSON error.
func (p *HostPolicy) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !p.Allows(r.Host) {
			e := hostRefused(r.Host)
			body, _ := MarshalNoEscape(ErrorBody{Detail: e.Detail, Code: e.Code})
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(e.Status)
			_, _ = io.WriteString(w, body+"\n")
			return
		}
		next.ServeHTTP(w, r)
	})
}
