package config

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestValidateNetwork(t *testing.T) {
	tests := []struct {
		name                  string
		allowedHosts, proxies string
		wantErr               string // substring; "" = valid
	}{
		{"empty", "", "", ""},
		{"names, wildcard and addresses", "api.example.com, *.corp.example, .internal, 192.0.2.7, [::1], *", "", ""},
		{"proxies", "", "10.0.0.0/8, 192.0.2.1, fd00::/8", ""},
		{"host with a port", "api.example.com:8000", "", `ALLOWED_HOSTS: "api.example.com:8000"`},
		{"host with a scheme", "https://api.example.com", "", `ALLOWED_HOSTS: "https://api.example.com"`},
		{"proxy not a CIDR", "", "10.0.0.0/33", `TRUSTED_PROXIES: "10.0.0.0/33"`},
		{"proxy a name", "", "proxy.local", `TRUSTED_PROXIES: "proxy.local"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			c.AllowedHosts, c.TrustedProxies = tt.allowedHosts, tt.proxies
			err := c.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate() = %v, want an error containing %s", err, tt.wantErr)
			}
		})
	}
}

func TestNetworkLists(t *testing.T) {
	c := valid()
	c.AllowedHosts, c.TrustedProxies, c.Host = " API.example.com ,*.corp.example", "10.1.2.3/8, 192.0.2.1", "192.0.2.9"
	if got, want := c.AllowedHostList(), []string{"api.example.com", "*.corp.example", "192.0.2.9"}; !slices.Equal(got, want) {
		t.Errorf("AllowedHostList() = %q, want %q", got, want)
	}
	c.Host = "0.0.0.0"
	if got := c.AllowedHostList(); slices.Contains(got, "0.0.0.0") {
		t.Errorf("AllowedHostList() = %q: the unspecified address is no host name", got)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.1/32")}
	if got := c.TrustedProxyPrefixes(); !slices.Equal(got, want) {
		t.Errorf("TrustedProxyPrefixes() = %v, want %v", got, want)
	}
}
