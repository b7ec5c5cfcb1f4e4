package admin

import (
	"net/http"
	"net/url"
	"strings"
)

// sameOrigin reports whether a form POST came from this site's own pages.
// The rule, for a browser's POST:
//   - Sec-Fetch-Site, when sent, must be "same-origin";
//   - Origin, when sent, must name the host the request was sent to
//     (http or https; "null" is refused);
//   - with neither Origin nor Sec-Fetch-Site (an old browser), the Referer
//     must name that host.
//
// So a request that shows nothing of where it came from is refused: the
// dashboard's POSTs come from its own forms, in a browser, which always
// says. SameSite=Strict on the cookie is the second line.
func sameOrigin(r *http.Request) bool {
	site := r.Header.Get("Sec-Fetch-Site")
	if site != "" && site != "same-origin" {
		return false
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		return sameHost(origin, r.Host)
	}
	if site == "same-origin" {
		return true
	}
	return sameHost(r.Header.Get("Referer"), r.Host)
}

// sameHost reports whether the URL u is http(s) on host.
func sameHost(u, host string) bool {
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Host != "" &&
		strings.EqualFold(p.Host, host)
}
