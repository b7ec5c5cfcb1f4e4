package render

import "testing"

// The capped writer stops the rendering by itself, before the pre-scan's
// count: the reference body, rendered with no pre-scan, stops at the cap.
func TestRenderStopsAtTheCap(t *testing.T) {
	r := New()
	body := hostileReferences(32 << 10)
	w := &cappedWriter{limit: MaxSize(len(body))}
	var err error
	alloc, _ := allocated(func() { err = r.md.Convert([]byte(body), w) })
	if err != errRenderedTooLarge {
		t.Errorf("Convert = %v, want errRenderedTooLarge", err)
	}
	if len(w.buf) > w.limit || cap(w.buf) > w.limit {
		t.Errorf("writer holds %d bytes (capacity %d), cap %d", len(w.buf), cap(w.buf), w.limit)
	}
	if limit := hostileAllocBound*uint64(len(body)) + hostileAllocSlack; alloc > limit {
		t.Errorf("rendering %d bytes allocated %d bytes, want at most %d", len(body), alloc, limit)
	}
	// What does fit is rendered whole, and the same as goldmark's own.
	w = &cappedWriter{limit: MaxSize(len("Hi **there**"))}
	if err := r.md.Convert([]byte("Hi **there**"), w); err != nil || string(w.buf) != "<p>Hi <strong>there</strong></p>\n" {
		t.Errorf("Convert(ordinary) = %q, %v", w.buf, err)
	}
}
