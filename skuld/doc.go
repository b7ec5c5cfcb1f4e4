// Package skuld is the send pipeline: load the inbox and thread → outbound
// domain filter → throttle → record → provider → record the outcome. It
// speaks to the throttle only through throttle.Throttle (package
// skuld/throttle and its backends), to the database through the few store
// methods it declares (Store, ThrottleLog) and to providers through
// Provider. Nothing here knows that HTTP exists.
//
// Held mail (scheduled, or queued when the throttle refuses) is accepted
// here, on the request's path (Schedule; Send with QueueOnThrottle), and
// recorded with its job in one transaction; package skuld/hold's jobs send
// it later through the same steps (AdmitHeld). skuld never imports hold.
//
// The pipeline records store's rows as they are: the message row is the
// record of what was sent, so a model of skuld's own would be a copy with a
// mapping function and nothing else.
package skuld
