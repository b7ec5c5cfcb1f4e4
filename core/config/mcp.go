package config

import (
	"fmt"
	"net/url"
	"strings"
)

// MCPClient is where `nornweave mcp` (MCP over stdio, for clients that
// launch a command) finds the running server it forwards to, under the
// names the Python package's MCP server reads. The server itself does not
// use them.
type MCPClient struct {
	// MCPAPIURL is the server's base URL; its MCP endpoint is /mcp.
	MCPAPIURL string `envconfig:"NORNWEAVE_API_URL" default:"http://localhost:8000"`
	// MCPAPIKey is the server's API_KEY, sent as X-API-Key.
	MCPAPIKey string `envconfig:"NORNWEAVE_API_KEY"`
}

// MCPEndpoint is the server's MCP endpoint: NORNWEAVE_API_URL + /mcp.
func (c MCPClient) MCPEndpoint() string {
	return strings.TrimSuffix(strings.TrimSpace(c.MCPAPIURL), "/") + "/mcp"
}

// ValidateMCPClient checks what `nornweave mcp` needs, and only that: the
// command runs where an agent runs, not where the server is configured.
func (c MCPClient) ValidateMCPClient() error {
	u, err := url.Parse(strings.TrimSpace(c.MCPAPIURL))
	switch {
	case err != nil:
		return fmt.Errorf("NORNWEAVE_API_URL: not a URL (e.g. http://localhost:8000)")
	case u.User != nil:
		return fmt.Errorf("NORNWEAVE_API_URL: %q carries credentials; put the key in NORNWEAVE_API_KEY", u.Redacted())
	case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("NORNWEAVE_API_URL: %q is not an http:// or https:// URL of a server "+
			"(e.g. http://localhost:8000)", c.MCPAPIURL)
	}
	return nil
}
