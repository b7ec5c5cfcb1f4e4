package providertest

import (
	"net/http"
	"regexp"
	"strings"
)

// SESQuota is the SendQuota the ses fake's GetAccount reports.
type SESQuota struct {
	Max24HourSend, MaxSendRate, SentLast24Hours float64
}

// DefaultSESQuota is what GetAccount reports until SetSESQuota: the
// example in SES's documentation.
var DefaultSESQuota = SESQuota{Max24HourSend: 50000, MaxSendRate: 14, SentLast24Hours: 120}

// SetSESQuota sets what GetAccount reports from now on.
func (f *Fake) SetSESQuota(q SESQuota) {
	f.mu.Lock()
	f.sesQuota = q
	f.mu.Unlock()
}

// sesAccountPath is SES v2's GetAccount: GET /v2/email/account.
const sesAccountPath = "/v2/email/account"

// sesSigV4 is the shape of a SigV4 Authorization header for SES:
// the key, the date, the region and the service in the credential scope.
var sesSigV4 = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=[A-Za-z0-9]+/(\d{8})/[a-z0-9-]+/ses/aws4_request, ` +
	`SignedHeaders=[a-z0-9;-]+, Signature=[0-9a-f]{64}$`)

// sesAccount answers GetAccount as SES documents it. A request that is not
// a GET, or not SigV4-signed for ses with a date matching its X-Amz-Date,
// gets SES's refusal, so a client that forgets to sign fails here as it
// would against AWS. The signature itself is not checked: the fake does
// not know the secret.
func (f *Fake) sesAccount(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("X-Amzn-ErrorType", "NotFoundException")
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not found: " + r.Method + " " + r.URL.Path})
		return
	}
	m := sesSigV4.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil || !strings.HasPrefix(r.Header.Get("X-Amz-Date"), m[1]) {
		w.Header().Set("X-Amzn-ErrorType", "IncompleteSignatureException")
		writeJSON(w, http.StatusForbidden, map[string]string{"message": "Authorization header requires a SigV4 signature for ses."})
		return
	}
	f.mu.Lock()
	q := f.sesQuota
	f.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"SendQuota":                    q,
		"SendingEnabled":               true,
		"ProductionAccessEnabled":      true,
		"EnforcementStatus":            "HEALTHY",
		"DedicatedIpAutoWarmupEnabled": false,
	})
}
