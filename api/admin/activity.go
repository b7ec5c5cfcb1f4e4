package admin

import "fmt"

// refusalLabels are the refusal reasons as the overview names them.
var refusalLabels = map[string]string{
	"throttled":      "Throttled (429)",
	"domain_blocked": "Domain blocked",
	"suppressed":     "Suppressed recipient",
	"validation":     "Validation",
}

// refusalLabel is reason's name on the page; a reason it does not know
// shows as itself.
func refusalLabel(reason string) string {
	if l, ok := refusalLabels[reason]; ok {
		return l
	}
	return reason
}

// RateRow is a reputation rate beside its threshold.
type RateRow struct {
	ID, Label       string // "bounce-rate", "Bounce rate"
	Rate, Threshold string // "5.01 %", "5 %"
	// Warn: the rate is over its threshold (not at it).
	Warn bool
}

// rateRows are r's bounce rate (to 2 decimals) and complaint rate (to 3),
// each against useSend's threshold.
func rateRows(r Reputation) []RateRow {
	b, c := r.BounceRate(), r.ComplaintRate()
	return []RateRow{
		{ID: "bounce-rate", Label: "Bounce rate", Rate: fmt.Sprintf("%.2f %%", 100*b),
			Threshold: percent(BounceWarn), Warn: b > BounceWarn},
		{ID: "complaint-rate", Label: "Complaint rate", Rate: fmt.Sprintf("%.3f %%", 100*c),
			Threshold: percent(ComplaintWarn), Warn: c > ComplaintWarn},
	}
}

// percent is a threshold as a percentage with no trailing zeros: "0.1 %".
func percent(f float64) string { return fmt.Sprintf("%g %%", 100*f) }
