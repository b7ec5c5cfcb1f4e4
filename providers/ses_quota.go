package providers

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/sesv2"
)

// SESQuota is an SES account's sending quota in the client's region, as
// SES v2 GetAccount reports it. SES counts recipients, not messages: a
// message to three addresses is three against both limits.
type SESQuota struct {
	// MaxSendRate is the recipients SES accepts per second.
	MaxSendRate float64
	// Max24HourSend is the recipients SES accepts in any 24 hours; -1
	// means no limit.
	Max24HourSend float64
	// SentLast24Hours is the recipients sent in the last 24 hours, by any
	// sender on the account, not only this server.
	SentLast24Hours float64
}

// Quota reads the account's sending quota with GetAccount. It takes no
// send slot (PROVIDER_MAX_CONCURRENCY): a read an hour must not wait
// behind sends, nor hold one up. The call is bounded by PROVIDER_TIMEOUT
// and, like a send, is not retried: the caller reads again later.
func (p *SES) Quota(ctx context.Context) (SESQuota, error) {
	select {
	case <-p.done:
		return SESQuota{}, fmt.Errorf("ses: read the send quota: %w", ErrProviderClosed)
	default:
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	out, err := p.client.GetAccount(ctx, &sesv2.GetAccountInput{})
	if err != nil {
		return SESQuota{}, fmt.Errorf("ses: read the send quota (GetAccount): %w", err)
	}
	if out.SendQuota == nil {
		// Without it a caller would take 0, which our limits read as
		// "unlimited": the unsafe way to be wrong.
		return SESQuota{}, errors.New("ses: read the send quota (GetAccount): the answer has no SendQuota")
	}
	q := out.SendQuota
	return SESQuota{MaxSendRate: q.MaxSendRate, Max24HourSend: q.Max24HourSend, SentLast24Hours: q.SentLast24Hours}, nil
}
