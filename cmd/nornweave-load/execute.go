package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// settleLimit is the longest wait for the sink after the last request.
const settleLimit = 2 * time.Second

// execute runs what o describes: sink, server, load, report, in that order,
// and takes them down in reverse. It returns the exit code.
func execute(ctx context.Context, o options, stdout, stderr io.Writer) int {
	now := time.Now
	fail := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "nornweave-load: "+format+"\n", args...)
		return 1
	}

	var sk *sink
	if o.sinkListener != nil || o.sink != "" {
		ln := o.sinkListener
		if ln == nil {
			var err error
			if ln, err = listenSink(o.sink); err != nil {
				return fail("sink: %v", err)
			}
		}
		sk = startSink(ln, now, o.sinkHang, stderr)
		defer sk.Close()
	}

	cfg := loadConfig{baseURL: o.url, apiKey: o.apiKey, inboxID: o.inbox, clients: o.clients,
		duration: o.duration, requests: o.requests, now: now, preferAsync: o.preferAsync, keepIDs: o.webhooks}
	var ch *child
	if o.spawn != "" {
		sc := spawnConfig{binary: o.spawn, db: o.db, databaseURL: o.databaseURL, provider: o.provider,
			perMinute: o.perMinute, perHour: o.perHour, apiKey: o.apiKey, extraEnv: o.serverEnv,
			logFile: o.serverLog}
		if o.webhooks {
			// Before -server-env, which may override them.
			sc.extraEnv = append([]string{"WEBHOOK_ALLOW_HTTP=true", "WEBHOOK_ALLOW_PRIVATE_TARGETS=true",
				"WEBHOOK_RETRY_SCHEDULE=" + o.hookSchedule}, o.serverEnv...)
		}
		if sk != nil {
			sc.sinkAddr = sk.Addr()
		}
		var err error
		if ch, err = spawn(ctx, sc); err != nil {
			return fail("spawn: %v", err)
		}
		defer ch.cleanup()
		cfg.baseURL = ch.URL
	}

	hc := newHTTPClient(o.clients)
	if cfg.inboxID == "" {
		id, err := createInbox(ctx, hc, cfg)
		if err != nil {
			if ch != nil {
				ch.stop()
				fmt.Fprintf(stderr, "end of the server log:\n%s\n", ch.log.Tail())
			}
			return fail("%v", err)
		}
		cfg.inboxID = id
	}

	if o.scheduleIn > 0 {
		cfg.scheduledAt = now().Add(o.scheduleIn).Truncate(time.Second)
	}
	var hooks *hookRun
	if o.webhooks {
		var err error
		if hooks, err = startHooks(ctx, hc, cfg, o.hookFailFirst, o.hookFailRequests, ch != nil && o.db == "postgres"); err != nil {
			if ch != nil {
				ch.stop()
				fmt.Fprintf(stderr, "end of the server log:\n%s\n", ch.log.Tail())
			}
			return fail("%v", err)
		}
		defer hooks.Close(context.WithoutCancel(ctx))
	}
	var hot *hotSender
	if o.hotEvery > 0 {
		var err error
		if hot, err = startHot(ctx, hc, cfg, o.hotEvery); err != nil {
			return fail("%v", err)
		}
	}
	res := runLoad(ctx, hc, cfg)
	var hotStatus map[string]int
	if hot != nil {
		hotStatus = hot.stop()
	}
	var hookRep *webhooksReport
	var hookViolations []string
	if hooks != nil {
		hookRep, hookViolations = hooks.finish(ctx, res, o.hookWait)
		// Now, while the server is up: the endpoints of a server that
		// lives on must go, before their receivers.
		hooks.Close(ctx)
	}
	hc.CloseIdleConnections()
	if sk != nil {
		// Held mail (202) arrives after the run, up to -drain later.
		want := res.sendStatus["sent"] + res.sendStatus["scheduled"] + res.sendStatus["queued"]
		sk.Settle(ctx, want, max(settleLimit, time.Until(cfg.scheduledAt)+o.drain))
	}
	var srv *serverReport
	if ch != nil {
		srv = &serverReport{DB: o.db, Provider: o.provider, PerMinute: o.perMinute, PerHour: o.perHour,
			ExitCode: ch.stop(), LogLines: ch.log.Lines(), CPUSec: ch.cpu().Seconds()}
	}
	var arrivals []time.Time
	if sk != nil {
		// After the server stopped, so a send it finished while draining counts too.
		arrivals = sk.Arrivals()
	}

	rep := buildReport(res, arrivals, sk != nil, o.perMinute, o.perHour)
	if sk != nil {
		rep.Sink.Duplicates = sk.Duplicates()
		if rep.Sink.Duplicates > 0 {
			rep.Violations = append(rep.Violations, fmt.Sprintf("%d messages arrived more than once", rep.Sink.Duplicates))
		}
		if !cfg.scheduledAt.IsZero() {
			rep.Sink.held(arrivals, cfg.scheduledAt, res.sendStatus["scheduled"])
			if lost := res.sendStatus["scheduled"] - rep.Sink.Received; lost > 0 {
				rep.Violations = append(rep.Violations, fmt.Sprintf("%d scheduled messages did not arrive", lost))
			}
		}
	}
	rep.Server = srv
	rep.HotStatus = hotStatus
	rep.Webhooks = hookRep
	rep.Violations = append(rep.Violations, hookViolations...)
	if o.preferAsync {
		if n := rep.Requests - res.httpStatus[http.StatusAccepted]; n > 0 {
			rep.Violations = append(rep.Violations, fmt.Sprintf("%d of %d answers to Prefer: respond-async were not 202", n, rep.Requests))
		}
	}
	if srv != nil && srv.ExitCode != 0 {
		rep.Violations = append(rep.Violations, fmt.Sprintf("server exited with code %d", srv.ExitCode))
		fmt.Fprintf(stderr, "end of the server log:\n%s\n", ch.log.Tail())
	}
	if err := rep.write(stdout, o.json); err != nil {
		return fail("write report: %v", err)
	}
	if len(rep.Violations) > 0 {
		return 1
	}
	return 0
}
