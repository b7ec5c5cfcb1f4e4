// Package skuld is the send pipeline: domain filter → throttle → provider → record; and the throttle itself.
package skuld
