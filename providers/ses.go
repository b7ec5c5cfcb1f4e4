package providers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"
)

// DefaultAWSRegion is used when SESConfig.Region is empty.
const DefaultAWSRegion = "us-east-1"

// SESConfig configures an Amazon SES provider.
type SESConfig struct {
	// AccessKeyID and SecretAccessKey are explicit credentials; when both
	// are empty the SDK's default chain (environment, shared profile, web
	// identity, container or instance role) is used.
	AccessKeyID, SecretAccessKey string
	Region                       string
	// Endpoint overrides the regional endpoint (a VPC endpoint, a gateway,
	// a test server).
	Endpoint string
	HTTPConfig
}

// SES sends through the SES v2 API (SendEmail with Content.Raw) with the
// official SDK, aws-sdk-go-v2 sesv2: the message is the MIME the SMTP
// provider builds, the recipients (Bcc included) go in Destination. The
// SDK's retryer is replaced by aws.NopRetryer. SES v2's SendEmail takes no
// idempotency token (SendEmailInput has none), so a message SES may have
// taken (an unknown outcome) is never sent again rather than deduplicated.
// It is safe for concurrent use.
type SES struct {
	*httpBase
	client *sesv2.Client
}

// NewSES validates cfg and returns a provider. With explicit credentials it
// makes no request; without, it reads the default chain's configuration
// (files and environment), which may not yet fetch credentials.
func NewSES(ctx context.Context, cfg SESConfig) (*SES, error) {
	if (cfg.AccessKeyID == "") != (cfg.SecretAccessKey == "") {
		return nil, errors.New("ses: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY go together")
	}
	if cfg.Region == "" {
		cfg.Region = DefaultAWSRegion
	}
	base, err := newHTTPBase("ses", "the AWS credentials", cfg.HTTPConfig)
	if err != nil {
		return nil, err
	}
	var creds aws.CredentialsProvider
	source := "AWS_ACCESS_KEY_ID"
	if cfg.AccessKeyID != "" {
		creds = credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, "")
	} else {
		source = "default credential chain"
		// The chain's own calls (STS, SSO, instance metadata) use the
		// SDK's client: they are not sends.
		ac, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(cfg.Region))
		if err != nil {
			return nil, fmt.Errorf("ses: load the AWS default configuration: %w", err)
		}
		creds = ac.Credentials
	}
	o := sesv2.Options{
		Region:      cfg.Region,
		Credentials: creds,
		HTTPClient:  base.client,
		// One attempt per Send: retrying is the send pipeline's decision.
		Retryer: aws.NopRetryer{},
	}
	if cfg.Endpoint != "" {
		o.BaseEndpoint = aws.String(cfg.Endpoint)
	}
	base.logger.Info("ses provider configured", slog.String("aws_region", cfg.Region),
		slog.String("aws_credentials", source), slog.Bool("custom_endpoint", cfg.Endpoint != ""))
	return &SES{httpBase: base, client: sesv2.New(o)}, nil
}

// Name returns "ses".
func (p *SES) Name() string { return "ses" }

// Close closes idle connections; later Sends fail. Safe to call twice.
func (p *SES) Close() error { return p.close() }

// Send delivers m and returns SES's MessageId. SES replaces the Message-ID
// header with its own; ours stays in the stored row. Failures are
// *SendError.
func (p *SES) Send(ctx context.Context, m Message) (string, error) {
	raw, err := encodeMIME(m, p.now)
	if err != nil {
		return "", invalidMessage("ses", err)
	}
	dest, err := sesDestination(m)
	if err != nil {
		return "", invalidMessage("ses", err)
	}
	in := &sesv2.SendEmailInput{
		FromEmailAddress: aws.String(m.From),
		Destination:      dest,
		Content:          &types.EmailContent{Raw: &types.RawMessage{Data: raw}},
	}
	id, err := p.call(ctx, m.MessageID, func(ctx context.Context) (string, error) {
		out, err := p.client.SendEmail(ctx, in)
		if err != nil {
			return "", err
		}
		return aws.ToString(out.MessageId), nil
	}, sesDetail)
	var se *SendError
	switch {
	case !errors.As(err, &se):
	case sesThrottled(se.Err):
		// SES throttling, whatever its status, says it took nothing.
		se.Temporary, se.Unknown, se.cause = true, false, CauseProviderUnavailable
	case se.Code == 0 && sesNoCredentials(se.Err):
		se.cause = CauseCredentials
		se.msg = "ses: not sent: no usable AWS credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, " +
			"or give the process a role the default credential chain finds)"
	case sesCredentialsRefused(se.Err) && se.cause != CauseSenderNotVerified:
		se.cause = CauseCredentials
	}
	return id, err
}

// sesNoCredentials reports that the SDK found no credentials before any
// request: its identity step (the default chain: environment, profile,
// SSO, web identity, container or instance role) failed. The SDK wraps the
// chain's error in text only ("get identity: get credentials: ..."), which
// TestCauseOfSESWithoutCredentials pins to the SDK in go.mod.
func sesNoCredentials(err error) bool {
	var sign *v4.SigningError
	return errors.As(err, &sign) || strings.Contains(err.Error(), "get identity:")
}

// sesCredentialsRefused reports the error codes AWS gives a request whose
// credentials are wrong, expired or without the permission to send; SES
// answers some with 400 rather than 403.
func sesCredentialsRefused(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "UnrecognizedClientException", "InvalidClientTokenId", "SignatureDoesNotMatch", "InvalidSignatureException",
		"IncompleteSignature", "MissingAuthenticationToken", "MissingAuthenticationTokenException",
		"ExpiredToken", "ExpiredTokenException", "AccessDeniedException", "AccessDenied":
		return true
	}
	return false
}

// sesDetail is the SES error code and message ("MessageRejected: Email
// address is not verified.").
func sesDetail(a *attempt, err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		s := ae.ErrorCode()
		if msg := ae.ErrorMessage(); msg != "" {
			s += ": " + msg
		}
		return strings.Join(strings.Fields(s), " ")
	}
	if a.status == 0 {
		return err.Error()
	}
	return apiDetail(a)
}

// sesThrottled reports SES's throttling codes: the v2 API's
// TooManyRequestsException (429) and the "Throttling" code SES also uses
// for its sending-rate limit.
func sesThrottled(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "TooManyRequestsException", "Throttling", "ThrottlingException":
		return true
	}
	return false
}

// sesDestination is the envelope: SES sends to these addresses, not to the
// headers, so Bcc reaches its recipients without a Bcc header.
func sesDestination(m Message) (*types.Destination, error) {
	d := &types.Destination{}
	d.ToAddresses, d.CcAddresses, d.BccAddresses = addrSpecs(m.To), addrSpecs(m.Cc), addrSpecs(m.Bcc)
	return d, nil
}
