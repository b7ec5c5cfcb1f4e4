package smtptest

// Parse decodes a raw RFC 5322 message as the server decodes what it
// receives, for tests of providers that hand over MIME by other means
// (an HTTP API). The envelope fields are empty.
func Parse(raw []byte) Message { return parse(raw) }
