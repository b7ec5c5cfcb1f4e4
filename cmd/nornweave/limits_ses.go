package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld/seslimits"
)

// limitsFromSES prints the throttle settings that match the SES account's
// quota (GetAccount), as lines for an env file: THROTTLE_UNIT=recipient,
// since SES counts recipients, and the global per-second and per-day
// limits at --margin of SES's. It reads SES with the credentials and
// region the SES provider would use, and opens no database: it may run
// before the first server does. args are those after from-ses.
func limitsFromSES(ctx context.Context, cfg config.Config, args []string, stdout, stderr io.Writer, logger *slog.Logger) int {
	fs := flag.NewFlagSet("nornweave limits from-ses", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are printed below, in our words
	// A string, parsed below: the flag package's own error says "-margin".
	marginFlag := fs.String("margin", strconv.FormatFloat(seslimits.DefaultMargin, 'f', -1, 64),
		"the share of SES's quota to use")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "nornweave limits from-ses: usage: nornweave limits from-ses [--margin 0.9]")
		return 2
	}
	margin, err := strconv.ParseFloat(*marginFlag, 64)
	if err == nil {
		err = seslimits.CheckMargin(margin)
	}
	if err != nil {
		fmt.Fprintf(stderr, "nornweave limits from-ses: --margin: want a number more than 0 and at most 1 "+
			"(the share of SES's quota to use), got %q\n", *marginFlag)
		return 2
	}

	region := cmp.Or(cfg.AWSRegion, providers.DefaultAWSRegion)
	p, err := providers.NewSES(ctx, providers.SESConfig{AccessKeyID: cfg.AWSAccessKeyID,
		SecretAccessKey: cfg.AWSSecretAccessKey, Region: region, Endpoint: cfg.SESEndpoint,
		HTTPConfig: providers.HTTPConfig{Timeout: cfg.ProviderTimeout, Logger: logger}})
	if err != nil {
		fmt.Fprintln(stderr, "nornweave limits from-ses:", err)
		return 1
	}
	defer p.Close()
	q, err := p.Quota(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "nornweave limits from-ses:", err)
		return 1
	}
	perSecond, perDay := seslimits.Limits(q, margin)
	num := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	fmt.Fprintf(stdout, "# from SES GetAccount (region %s): MaxSendRate %s/s, Max24HourSend %s, SentLast24Hours %s; margin %s\n",
		region, num(q.MaxSendRate), num(q.Max24HourSend), num(q.SentLast24Hours), num(margin))
	fmt.Fprintln(stdout, "THROTTLE_UNIT=recipient")
	// Limit is never 0 for a positive quota, so 0 here is SES's "no limit".
	if perSecond == 0 {
		fmt.Fprintf(stdout, "# SES reports no per-second limit (MaxSendRate %s): 0 is unlimited\n", num(q.MaxSendRate))
	}
	fmt.Fprintf(stdout, "GLOBAL_SEND_RATE_LIMIT_PER_SECOND=%d\n", perSecond)
	if perDay == 0 {
		fmt.Fprintf(stdout, "# SES reports no 24-hour quota (Max24HourSend %s): 0 is unlimited\n", num(q.Max24HourSend))
	}
	fmt.Fprintf(stdout, "GLOBAL_SEND_RATE_LIMIT_PER_DAY=%d\n", perDay)
	return 0
}
