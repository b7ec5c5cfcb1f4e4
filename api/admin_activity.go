package api

import (
	"context"
	"time"

	"github.com/nornweave/nornweave/api/admin"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/activity"
	"github.com/nornweave/nornweave/store"
)

// The spans the overview charts: the last hour by minute, the last week
// by hour; refusals over the last day, by hour.
const (
	chartMinutes  = 60
	chartHours    = 7 * 24
	refusalsHours = 24
)

// adminActivity reads what the overview charts from send_counts (three
// ranges of its primary key, at most 60 and 168 buckets of seven kinds)
// and the bounces and complaints of the last 24 hours from
// delivery_events' (type, created_at) index. A bucket of the minute or
// the hour under way counts what the servers have added so far (each adds
// about once a second).
func (a *API) adminActivity(ctx context.Context, now time.Time) (*admin.Activity, error) {
	now = now.UTC()
	minute, hour := now.Truncate(time.Minute), now.Truncate(time.Hour)
	minutes, err := a.Store.SendCounts(ctx, store.WidthMinute, minute.Add(-(chartMinutes-1)*time.Minute), minute.Add(time.Minute))
	if err != nil {
		return nil, err
	}
	hours, err := a.Store.SendCounts(ctx, store.WidthHour, hour.Add(-(chartHours-1)*time.Hour), hour.Add(time.Hour))
	if err != nil {
		return nil, err
	}
	act := &admin.Activity{
		Minutes: buckets(minutes, minute, chartMinutes, time.Minute),
		Hours:   buckets(hours, hour, chartHours, time.Hour),
	}
	day := hour.Add(-(refusalsHours - 1) * time.Hour)
	refused := map[string]int64{}
	var sent int64
	for _, c := range hours {
		if c.Start.Before(day) {
			continue
		}
		refused[c.Kind] += c.Count
		if c.Kind == skuld.OutcomeSent {
			sent += c.Count
		}
	}
	for _, r := range activity.Reasons {
		act.Refusals = append(act.Refusals, admin.Refusal{Reason: r, Count: refused[r]})
	}
	hard, complaints, err := a.Store.Complaints(ctx, now.Add(-activity.ReputationWindow))
	if err != nil {
		return nil, err
	}
	act.Reputation = &admin.Reputation{Sent: sent, Bounced: hard, Complained: complaints}
	return act, nil
}

// buckets lays counts out as n buckets of width ending with the one that
// begins at last, oldest first, zeros included: sent, and failed with the
// sends whose delivery is unknown (recorded as failed, counted by the
// throttle).
func buckets(counts []store.SendCount, last time.Time, n int, width time.Duration) []admin.Bucket {
	first := last.Add(-time.Duration(n-1) * width)
	out := make([]admin.Bucket, n)
	for i := range out {
		out[i].Start = first.Add(time.Duration(i) * width)
	}
	for _, c := range counts {
		i := int(c.Start.UTC().Sub(first) / width)
		if i < 0 || i >= n {
			continue
		}
		switch c.Kind {
		case skuld.OutcomeSent:
			out[i].Sent += c.Count
		case skuld.OutcomeFailed, skuld.OutcomeUnknown:
			out[i].Failed += c.Count
		}
	}
	return out
}
