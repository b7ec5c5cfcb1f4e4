package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"
)

// maxDeliveriesPerID is the most 2xx answers one event may get at one
// receiver: delivery is at least once, and an attempt whose 2xx was not
// recorded in time is sent again, but never more than that once.
const maxDeliveriesPerID = 2

// webhooksReport is a -webhooks run: how fast the events of the sends
// were delivered, against how fast the sends went.
type webhooksReport struct {
	// Sends is the messages sent (or queued) whose events were awaited;
	// SendsPerSec is them per second from the first request to the last
	// answer.
	Sends       int     `json:"sends"`
	SendsPerSec float64 `json:"sends_per_second"`
	// Events is the distinct events answered 2xx at every receiver;
	// DeliveredSec is from the first request to the last 2xx that
	// completed one of them.
	Events          int     `json:"events_at_all_receivers"`
	DeliveredSec    float64 `json:"delivered_seconds"`
	DeliveredPerSec float64 `json:"delivered_per_second"`
	// Ratio is DeliveredPerSec ÷ SendsPerSec.
	Ratio float64 `json:"ratio"`
	// WaitSec is how long after the last answer the run waited for the
	// events, AllDelivered whether every sent message's event reached
	// every receiver.
	WaitSec          float64            `json:"wait_seconds"`
	AllDelivered     bool               `json:"all_delivered"`
	Receivers        []receiverReport   `json:"receivers"`
	LogFirstMismatch string             `json:"log_first_mismatch,omitempty"`
	ServerMetrics    map[string]float64 `json:"server_metrics,omitempty"` // nornweave_webhook_*
}

// finish waits up to limit after the load for the events of its sends,
// checks the receivers' counts and the server's delivery log, and
// returns the report and the violations.
func (h *hookRun) finish(ctx context.Context, res loadResult, limit time.Duration) (*webhooksReport, []string) {
	var violations []string
	fail := func(format string, args ...any) { violations = append(violations, fmt.Sprintf(format, args...)) }
	ids := res.ids
	rep := &webhooksReport{Sends: len(ids)}
	if s := res.elapsed.Seconds(); s > 0 {
		rep.SendsPerSec = float64(len(ids)) / s
	}
	if len(ids) == 0 {
		fail("webhooks: no message was sent")
	}
	t0 := time.Now()
	ok, why := h.wait(ctx, ids, limit)
	rep.WaitSec = time.Since(t0).Seconds()
	rep.AllDelivered = ok
	if !ok {
		fail("webhooks: not every event delivered: %s", why)
	}

	for i, r := range h.rs {
		rr := r.report(ids, res.start)
		rr.EndpointID = h.endpoints[i]
		on, reason, enErr := h.enabled(ctx, h.endpoints[i])
		if enErr != nil {
			fail("webhooks: endpoint %s: %v", r.name, enErr)
		}
		rr.Enabled, rr.DisabledReason = on, reason
		events, bad, first, err := h.checkLog(ctx, h.endpoints[i], r.answers())
		if err != nil {
			fail("webhooks: delivery log of %s: %v", r.name, err)
		}
		rr.LogEvents, rr.LogMismatches = events, bad
		if first != "" && rep.LogFirstMismatch == "" {
			rep.LogFirstMismatch = r.name + ": " + first
		}
		rep.Receivers = append(rep.Receivers, rr)
		if rr.MissingSent > 0 {
			fail("webhooks: %s: %d sent messages without their message.sent answered 2xx", r.name, rr.MissingSent)
		}
		if rr.MaxPerID > maxDeliveriesPerID {
			fail("webhooks: %s: an event was answered 2xx %d times, at most %d allowed", r.name, rr.MaxPerID, maxDeliveriesPerID)
		}
		if rr.BadSignatures > 0 || rr.BadRequests > 0 {
			fail("webhooks: %s: %d bad signatures, %d requests that were not deliveries", r.name, rr.BadSignatures, rr.BadRequests)
		}
		if enErr == nil && !rr.Enabled {
			fail("webhooks: %s: endpoint disabled: %s", r.name, rr.DisabledReason)
		}
		if rr.LogMismatches > 0 {
			fail("webhooks: %s: %d of %d events in the delivery log not tried as answered", r.name, bad, events)
		}
		if rr.LogEvents != rr.Delivered {
			fail("webhooks: %s: the delivery log has %d events, the receiver %d delivered", r.name, events, rr.Delivered)
		}
	}

	events, last := atAll(h.rs)
	rep.Events = events
	if events > 0 {
		rep.DeliveredSec = last.Sub(res.start).Seconds()
		rep.DeliveredPerSec = float64(events) / rep.DeliveredSec
	}
	if rep.SendsPerSec > 0 {
		rep.Ratio = rep.DeliveredPerSec / rep.SendsPerSec
	}
	if m, err := h.webhookMetrics(ctx); err == nil {
		rep.ServerMetrics = m
	}
	return rep, violations
}

// atAll counts the events answered 2xx at every receiver, and returns
// the time the last of them was complete: its latest first 2xx.
func atAll(rs []*receiver) (int, time.Time) {
	if len(rs) == 0 {
		return 0, time.Time{}
	}
	done := rs[0].delivered()
	for _, r := range rs[1:] {
		other := r.delivered()
		for id, at := range done {
			if o, ok := other[id]; !ok {
				delete(done, id)
			} else if o.After(at) {
				done[id] = o
			}
		}
	}
	var last time.Time
	for _, at := range done {
		if at.After(last) {
			last = at
		}
	}
	return len(done), last
}

// write prints w as text.
func (w *webhooksReport) write(out io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(out, format, args...) }
	p("webhooks       %d sends, %.1f sends/s; %d events at every receiver, %.1f delivered/s "+
		"(first request to last 2xx, %.2f s); ratio %.3f\n",
		w.Sends, w.SendsPerSec, w.Events, w.DeliveredPerSec, w.DeliveredSec, w.Ratio)
	p("webhooks wait  %.2f s after the last answer; all delivered: %v\n", w.WaitSec, w.AllDelivered)
	for _, r := range w.Receivers {
		state := "enabled"
		if !r.Enabled {
			state = "DISABLED: " + r.DisabledReason
		}
		p("receiver %s     fails first %d: %d requests, %d answered 500, %d ids delivered (%.1f/s, the last at %.2f s), "+
			"max %d 2xx per id, %d missing, %d bad signatures, %d bad requests; log %d events, %d not as answered; %s\n",
			r.Name, r.FailFirst, r.Requests, r.Answered500, r.Delivered, r.DeliveredPerSec, r.LastDeliverySec,
			r.MaxPerID, r.MissingSent, r.BadSignatures, r.BadRequests, r.LogEvents, r.LogMismatches, state)
	}
	if w.LogFirstMismatch != "" {
		p("log mismatch   %s\n", w.LogFirstMismatch)
	}
	for _, k := range slices.Sorted(maps.Keys(w.ServerMetrics)) {
		p("server metric  %s %g\n", k, w.ServerMetrics[k])
	}
}
