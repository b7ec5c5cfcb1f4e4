// Command nornweave-load drives a NornWeave server on loopback with
// concurrent POST /v1/messages and reports throughput, latency percentiles
// and status counts. With -sink it also receives the mail itself and checks
// the throttle's promise from the outside: the largest number of messages
// that arrived in any 60 s (and 3600 s). With -spawn it starts the server
// binary too, so one command measures a fresh server end to end.
//
// With -webhooks it measures webhooks out: it serves two webhook receivers
// on loopback and registers both for message.sent (a spawned server gets
// WEBHOOK_ALLOW_HTTP, WEBHOOK_ALLOW_PRIVATE_TARGETS and
// -webhook-retry-schedule). Receiver A answers every attempt 200; B answers
// the first -webhook-fail-first attempts of each event (by webhook-id) 500
// and the next 200. After the last send it waits, at most -webhook-wait,
// until every sent message's message.sent was answered 2xx at both, then
// reports sends/s, events delivered/s (events at both ÷ the time from the
// first request to the last 2xx) and their ratio, each receiver's counts,
// and checks the server's delivery log of every event against what the
// receivers answered. Any event missing, delivered more than twice, badly
// signed or logged otherwise is a violation.
//
// -prefer-async sends Prefer: respond-async, and any answer but 202 is a
// violation; with -sink-hang the sink holds each message that long before
// answering its DATA, so the latency reported is POST's while the relay
// hangs.
//
// It is bounded on purpose: loopback URLs only, and every run stops after
// -duration (at most 10 minutes) or -requests, whichever comes first.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// maxDuration caps a run, so a typo cannot leave a load running for hours.
const maxDuration = 10 * time.Minute

// maxDrain caps the wait for held mail after a run: 10,000 messages at 600
// a minute take 17 minutes to leave.
const maxDrain = 30 * time.Minute

// options is everything the flags say. sinkListener is not a flag: a test
// that must know the sink's address before it starts the server passes the
// listener in.
type options struct {
	url         string
	apiKey      string
	inbox       string
	clients     int
	duration    time.Duration
	requests    int
	json        bool
	sink        string
	spawn       string
	db          string
	databaseURL string
	provider    string
	perMinute   int
	perHour     int
	serverEnv   []string // extra KEY=VALUE settings of the spawned server
	serverLog   string   // -server-log: a copy of the spawned server's log
	// scheduleIn, when set, schedules every message for one second this
	// long after the run starts (scheduled_at); drain is how long to wait
	// for held mail to arrive at the sink after the last request.
	scheduleIn   time.Duration
	drain        time.Duration
	hotEvery     time.Duration // see hotSender; 0: none
	sinkListener net.Listener
	// The -webhooks run (hookRun) and the async one.
	webhooks      bool
	hookSchedule  string
	hookFailFirst int
	// hookFailRequests is how many of receiver B's first requests, of any
	// event, it answers 500.
	hookFailRequests int
	hookWait         time.Duration
	preferAsync      bool
	sinkHang         time.Duration
}

func main() { os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)) }

// run is the whole program; it returns the exit code: 0 on success, 1 when
// the run failed or the sink saw more mail than -per-minute/-per-hour
// allow, 2 on bad usage.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "nornweave-load: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return execute(ctx, o, stdout, stderr)
}

// parseFlags reads and checks the flags.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("nornweave-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.url, "url", "http://127.0.0.1:8000", "base URL of a running server (loopback only); ignored with -spawn")
	fs.StringVar(&o.apiKey, "api-key", "", "API key sent as X-API-Key (and given to a spawned server)")
	fs.StringVar(&o.inbox, "inbox", "", "sending inbox id; empty creates one with a random username")
	fs.IntVar(&o.clients, "clients", 32, "concurrent clients")
	fs.DurationVar(&o.duration, "duration", 30*time.Second, "stop after this long (at most 10m)")
	fs.IntVar(&o.requests, "requests", 0, "stop after this many requests in total (0: only -duration bounds the run)")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.StringVar(&o.sink, "sink", "", `run an SMTP sink on this loopback address, or "auto" for a free port`)
	fs.StringVar(&o.sink, "sink-addr", "", "same as -sink")
	fs.StringVar(&o.spawn, "spawn", "", "start this server binary on a free loopback port and load it")
	fs.StringVar(&o.db, "db", "sqlite", "spawned server's DB_DRIVER: sqlite (fresh file) or postgres")
	fs.StringVar(&o.databaseURL, "database-url", "", "spawned server's DATABASE_URL (required with -db postgres)")
	fs.StringVar(&o.provider, "provider", "smtp", "spawned server's EMAIL_PROVIDER: smtp (to the sink) or demo")
	fs.IntVar(&o.perMinute, "per-minute", 0, "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE of the spawned server; also the overshoot check")
	fs.IntVar(&o.perHour, "per-hour", 0, "GLOBAL_SEND_RATE_LIMIT_PER_HOUR of the spawned server; also the overshoot check")
	fs.DurationVar(&o.scheduleIn, "schedule-in", 0, "schedule every message for the same second, this long after the start (0: send now)")
	fs.DurationVar(&o.drain, "drain", 0, "after the last request, wait up to this long for held mail to reach the sink (at most 30m)")
	fs.DurationVar(&o.hotEvery, "hot-every", 0, "keep a shared throttle hot: send this often from a second inbox "+
		"whose limit is reached, each refused (0: none)")
	fs.BoolVar(&o.webhooks, "webhooks", false, "serve two webhook receivers (A: always 200; B: 500 to the first "+
		"-webhook-fail-first attempts of each event), register both for message.sent, and wait for and check "+
		"every sent message's event at both")
	fs.StringVar(&o.hookSchedule, "webhook-retry-schedule", "100ms,100ms,100ms,100ms",
		"WEBHOOK_RETRY_SCHEDULE of a server spawned with -webhooks")
	fs.IntVar(&o.hookFailFirst, "webhook-fail-first", 2, "receiver B answers this many attempts of each event 500")
	fs.IntVar(&o.hookFailRequests, "webhook-fail-requests", 0, "receiver B answers this many of its first requests 500, whatever their event (with -webhook-fail-first 0: an endpoint that fails its first attempts)")
	fs.DurationVar(&o.hookWait, "webhook-wait", 5*time.Minute, "after the last send, wait up to this long "+
		"for every event to be delivered (at most 30m)")
	fs.BoolVar(&o.preferAsync, "prefer-async", false, "send Prefer: respond-async; an answer other than 202 is a violation")
	fs.DurationVar(&o.sinkHang, "sink-hang", 0, "the sink holds each message this long after its DATA before "+
		"answering (at most 10m): a relay that hangs")
	fs.StringVar(&o.serverLog, "server-log", "", "write the spawned server's whole log to this file too")
	fs.Func("server-env", "KEY=VALUE added to the spawned server's environment (repeatable), "+
		"e.g. THROTTLE_BACKEND=redis", func(kv string) error {
		if !strings.Contains(kv, "=") {
			return errors.New("want KEY=VALUE")
		}
		o.serverEnv = append(o.serverEnv, kv)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return o, o.validate()
}

// validate rejects runs that would be unbounded or leave loopback.
func (o *options) validate() error {
	switch {
	case o.clients < 1:
		return fmt.Errorf("-clients must be at least 1, got %d", o.clients)
	case o.duration <= 0 || o.duration > maxDuration:
		return fmt.Errorf("-duration must be more than 0 and at most %s, got %s", maxDuration, o.duration)
	case o.hotEvery < 0:
		return errors.New("-hot-every must not be negative")
	case o.scheduleIn < 0 || o.drain < 0 || o.drain > maxDrain:
		return fmt.Errorf("-schedule-in must not be negative and -drain must be 0..%s", maxDrain)
	case o.requests < 0:
		return fmt.Errorf("-requests must not be negative, got %d", o.requests)
	case o.perMinute < 0 || o.perHour < 0:
		return errors.New("-per-minute and -per-hour must not be negative")
	case o.db != "sqlite" && o.db != "postgres":
		return fmt.Errorf("-db must be sqlite or postgres, got %q", o.db)
	case o.db == "postgres" && o.spawn != "" && o.databaseURL == "":
		return errors.New("-db postgres needs -database-url")
	case o.provider != "smtp" && o.provider != "demo":
		return fmt.Errorf("-provider must be smtp or demo, got %q", o.provider)
	case o.sinkHang < 0 || o.sinkHang > maxDuration:
		return fmt.Errorf("-sink-hang must be 0..%s", maxDuration)
	case o.hookWait <= 0 || o.hookWait > maxDrain:
		return fmt.Errorf("-webhook-wait must be more than 0 and at most %s", maxDrain)
	}
	if o.webhooks {
		retries, err := countRetries(o.hookSchedule)
		if err != nil {
			return fmt.Errorf("-webhook-retry-schedule: %w", err)
		}
		if o.hookFailFirst < 0 || o.hookFailFirst > retries {
			// B must answer 200 to the last attempt at the latest.
			return fmt.Errorf("-webhook-fail-first must be 0..%d, the schedule's retries", retries)
		}
	}
	if o.spawn != "" && o.provider == "smtp" && o.sink == "" {
		// A spawned smtp server has nowhere else to send.
		o.sink = "auto"
	}
	if o.sink != "" && o.sink != "auto" {
		if err := requireLoopback(o.sink); err != nil {
			return fmt.Errorf("-sink: %w", err)
		}
	}
	if o.spawn == "" {
		u, err := url.Parse(o.url)
		if err != nil || u.Scheme != "http" {
			return fmt.Errorf("-url must be an http:// URL, got %q", o.url)
		}
		if err := requireLoopback(u.Host); err != nil {
			return fmt.Errorf("-url: %w", err)
		}
	}
	return nil
}

// countRetries reads a retry schedule as the server does: waits, comma
// separated, each a retry after the first attempt.
func countRetries(schedule string) (int, error) {
	fields := strings.Split(schedule, ",")
	for _, f := range fields {
		if d, err := time.ParseDuration(strings.TrimSpace(f)); err != nil || d <= 0 {
			return 0, fmt.Errorf("%q is not a positive duration", strings.TrimSpace(f))
		}
	}
	return len(fields), nil
}

// requireLoopback accepts host:port (or a bare host) naming this machine
// only: a load tool pointed at someone else's server is an attack.
func requireLoopback(hostport string) error {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%q is not a loopback address", hostport)
}
