// Package seslimits turns an Amazon SES account's sending quota into the
// throttle's global per-second and per-day limits, once (Limits, for
// `nornweave limits from-ses`) or hourly while the server runs (Refresher,
// for SES_LIMITS_FROM_ACCOUNT=true).
//
// SES counts recipients, so the limits it gives are meant for
// THROTTLE_UNIT=recipient; this package sets the numbers, not the unit.
package seslimits

import (
	"fmt"
	"math"

	"github.com/nornweave/nornweave/providers"
)

// DefaultMargin is the share of SES's quota the throttle uses when none is
// chosen: 10 % left for other senders on the account and for the
// difference between our clock and SES's.
const DefaultMargin = 0.9

// CheckMargin reports whether margin is a share of the quota: more than 0,
// at most 1. Above 1 the throttle would let through what SES refuses.
func CheckMargin(margin float64) error {
	if !(margin > 0 && margin <= 1) { // NaN fails too
		return fmt.Errorf("want a number more than 0 and at most 1, got %v", margin)
	}
	return nil
}

// Limits is the throttle's global per-second and per-day limits for
// quota q with margin (see CheckMargin): each is Limit of the matching
// SES number. SentLast24Hours is not subtracted: the per-day window is
// rolling, like SES's, and counts this server's own sends.
func Limits(q providers.SESQuota, margin float64) (perSecond, perDay int) {
	return Limit(q.MaxSendRate, margin), Limit(q.Max24HourSend, margin)
}

// Limit is quota × margin rounded down, at least 1 when quota is positive:
// our 0 means unlimited, so rounding a small quota (a sandbox's 1/s at
// 0.9) down to 0 would lift the limit instead of keeping under it. A quota
// SES reports as no limit (-1, or 0) is 0, unlimited. A fractional quota
// under 1 (0.5/s) gives 1, the least the throttle can express.
func Limit(quota, margin float64) int {
	if !(quota > 0) || math.IsInf(quota, 1) {
		return 0
	}
	x := quota * margin
	// 0.29 × 100 is 28.999999999999996 in floating point: a hair of
	// tolerance keeps an exact product from losing one to the floor.
	n := math.Floor(x + x*1e-12)
	if n >= math.MaxInt32 { // no account has this; an int everywhere holds it
		return math.MaxInt32
	}
	return max(int(n), 1)
}
