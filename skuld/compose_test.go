package skuld

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"testing"
	"unsafe"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/store"
)

// attStore is memStore keeping the attachment rows it was given.
type attStore struct {
	*memStore
	atts []store.Attachment
}

func (s *attStore) CreateMessage(ctx context.Context, m *store.Message, atts []store.Attachment, t *store.Thread, slot *store.SendSlot) error {
	s.atts = atts
	return s.memStore.CreateMessage(ctx, m, atts, t, slot)
}

// What is recorded and what goes out for each combination of body and
// html, with labels, metadata and attachments.
func TestBuildRecordsWhatGoesOut(t *testing.T) {
	pdf := []byte("%PDF-1.7 \x00\xff")
	tests := []struct {
		name               string
		body, html         string
		wantText, wantHTML string
	}{
		{"markdown body", "Hi **Ann**", "", "Hi **Ann**", "<p>Hi <strong>Ann</strong></p>\n"},
		{"body and html", "Hi Ann", "<p>Hi <em>Ann</em></p>", "Hi Ann", "<p>Hi <em>Ann</em></p>"},
		{"html only: text derived", "", `<p>Hi <em>Ann</em>,</p><p>see <a href="https://acme.test/o">your order</a></p>`,
			"Hi Ann,\n\nsee your order (https://acme.test/o)", `<p>Hi <em>Ann</em>,</p><p>see <a href="https://acme.test/o">your order</a></p>`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, p := &attStore{memStore: newMemStore()}, &fakeProvider{}
			clock := newFakeClock()
			s := NewSender(Options{Store: st, Provider: p, Throttle: throttle.NewMemory(newLimiter(0), clock), Clock: clock})
			req := SendRequest{InboxID: "ib1", To: address.MustParseList("b@x.test"), Subject: "s",
				Body: tt.body, HTML: tt.html, Labels: []string{"billing", "q3"},
				Metadata:    map[string]any{"order": "42", "n": 1},
				Attachments: []providers.Attachment{{Filename: "a.pdf", ContentType: "application/pdf", Content: pdf}}}
			res, err := s.Send(context.Background(), req)
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			m := res.Message
			if m.Text != tt.wantText || m.HTML != tt.wantHTML {
				t.Errorf("recorded text %q html %q, want %q and %q", m.Text, m.HTML, tt.wantText, tt.wantHTML)
			}
			if len(p.sent) != 1 || p.sent[0].Text != tt.wantText || p.sent[0].HTML != tt.wantHTML {
				t.Fatalf("sent %+v, want text %q and html %q", p.sent, tt.wantText, tt.wantHTML)
			}
			if !reflect.DeepEqual([]string(m.Labels), req.Labels) || !reflect.DeepEqual(map[string]any(m.Metadata), req.Metadata) {
				t.Errorf("recorded labels %v metadata %v, want %v %v", m.Labels, m.Metadata, req.Labels, req.Metadata)
			}
			if want := len(tt.wantText) + len(tt.wantHTML) + len(pdf); m.Size != want {
				t.Errorf("recorded size %d, want %d", m.Size, want)
			}

			sum := sha256.Sum256(pdf)
			if len(st.atts) != 1 || st.atts[0].ContentHash == nil || *st.atts[0].ContentHash != hex.EncodeToString(sum[:]) {
				t.Fatalf("attachment rows %+v, want one with the content's SHA-256", st.atts)
			}
			// The row keeps the very bytes that went out: a 35 MB send is
			// not copied once more to be stored.
			if a := st.atts[0]; unsafe.SliceData(a.Content) != unsafe.SliceData(req.Attachments[0].Content) || len(a.Content) != len(pdf) {
				t.Errorf("the row's content is a copy of the attachment, want the same bytes")
			}
		})
	}
}

// A send with HTML and no body is bounded as if its text were as long as
// the HTML, which PlainText never exceeds.
func TestSizeBoundCountsTheDerivedText(t *testing.T) {
	html := "<p>hello</p>"
	if got, want := sizeBound(SendRequest{HTML: html}), 2*len(html); got != want {
		t.Errorf("sizeBound(html only) = %d, want %d", got, want)
	}
	if got, want := sizeBound(SendRequest{Body: "b", HTML: html}), 1+len(html); got != want {
		t.Errorf("sizeBound(body and html) = %d, want %d", got, want)
	}
}
