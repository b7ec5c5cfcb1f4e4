package filter

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nornweave/nornweave/core/address"
)

func BenchmarkDomainFilter10(b *testing.B)  { benchmarkDomainFilter(b, 10) }
func BenchmarkDomainFilter100(b *testing.B) { benchmarkDomainFilter(b, 100) }

// benchmarkDomainFilter checks a three-recipient message that passes n/2
// blocklist and n/2 allowlist patterns, the last allowlist pattern being the
// one that admits it.
func benchmarkDomainFilter(b *testing.B, n int) {
	var allow, block []string
	for i := range n / 2 {
		block = append(block, fmt.Sprintf(`(.*\.)?blocked%d\.example`, i))
		allow = append(allow, fmt.Sprintf(`(.*\.)?partner%d\.example`, i))
	}
	f, err := New(strings.Join(allow, ","), strings.Join(block, ","))
	if err != nil {
		b.Fatal(err)
	}
	last := fmt.Sprintf("partner%d.example", n/2-1)
	to := address.MustParseList("ann@"+last, "bob@mail."+last)
	cc := address.MustParseList("Carol@" + strings.ToUpper(last))
	b.ReportAllocs()
	for b.Loop() {
		if rejected := f.Rejected(to, cc); rejected != nil {
			b.Fatalf("Rejected: got %v, want nil", rejected)
		}
	}
}
