package address

import (
	"mime"
	"regexp"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// CheckName reports whether name can be a display name in a header: no
// control characters (a CR or LF would break the header, a NUL cannot be
// stored; see CheckText) and nothing that reads as an address, which would
// let "Q <admin@bank.com>" pose as another sender. "Reads as" covers what
// a mail reader shows, not only the bytes: '@', '<' and '>', their
// compatibility forms (＠ ﹫ ＜ ＞ ﹤ ﹥, folded by NFKC), their look-alikes
// in Unicode's confusables.txt and the angle brackets (‹ › ᐸ ᐳ 〈 〉 ⟨ ⟩
// ...), also once RFC 2047 encoded words in it are decoded, as readers do
// even inside a quoted string ("=?utf-8?q?admin=40bank.com?=").
//
// An inbox's name, the From's display name, is held to the same rule
// wherever it is set.
func CheckName(name string) error {
	if hasControl(name) || CheckText(name) != nil {
		return ErrControl
	}
	decoded, ok := decodeWords(name)
	if !ok {
		return ErrName
	}
	if hasControl(decoded) {
		return ErrControl
	}
	if addressLike(name) || addressLike(decoded) {
		return ErrName
	}
	return nil
}

// maxDecodeRounds bounds the decoding of encoded words that decode to
// encoded words; a reader that decodes twice must see nothing new either.
const maxDecodeRounds = 3

// encodedWord finds what a lenient reader takes for an RFC 2047 word,
// wherever it stands (also inside a quoted string or a longer word).
var encodedWord = regexp.MustCompile(`=\?[^?\s]*\?[a-zA-Z]\?[^?]*\?=`)

// decodeWords decodes the encoded words in s until none are left, or
// reports false when one cannot be decoded for sure (an unknown charset, a
// malformed word, a word that decodes to a word maxDecodeRounds deep):
// what a reader would show is then unknown, and the name is refused.
func decodeWords(s string) (string, bool) {
	dec := mime.WordDecoder{} // UTF-8, US-ASCII and ISO-8859-1; any other charset is an error
	for range maxDecodeRounds {
		if !encodedWord.MatchString(s) {
			return s, true
		}
		var failed bool
		s = encodedWord.ReplaceAllStringFunc(s, func(w string) string {
			d, err := dec.Decode(w)
			if err != nil {
				failed = true
			}
			return d
		})
		if failed {
			return "", false
		}
	}
	return s, !encodedWord.MatchString(s)
}

// addressLike reports '@', '<' or '>' in s or in its NFKC form (which folds
// the fullwidth and small forms), or a look-alike of one.
func addressLike(s string) bool {
	if strings.ContainsAny(s, "@<>") || strings.ContainsAny(norm.NFKC.String(s), "@<>") {
		return true
	}
	return strings.ContainsFunc(s, func(r rune) bool { return lookalikes[r] })
}

// lookalikes are the characters Unicode's confusables.txt (UTS #39) maps to
// '<' or '>' (alone or with a dot or a twin), and the angle brackets of
// other blocks, which render as they do. '@' has no entry there besides
// its compatibility forms, which NFKC folds.
var lookalikes = map[rune]bool{
	// '<' and its family
	'\u02C2': true, '\u1438': true, '\u16B2': true, '\u2039': true, '\u276E': true,
	'\U0001D236': true, '\u226A': true, '\u22D6': true, '\u22D8': true, '\u2CB4': true,
	'\u1444': true, '\u1445': true, '\u150C': true, '\u2329': true, '\u27E8': true,
	'\u3008': true, '\u276C': true,
	// '>' and its family
	'\u02C3': true, '\u1433': true, '\U00016F3F': true, '\u203A': true, '\u276F': true,
	'\U0001D237': true, '\u226B': true, '\u22D7': true, '\u22D9': true, '\u2A20': true,
	'\u1437': true, '\u1440': true, '\u1441': true, '\u2AA5': true, '\u232A': true,
	'\u27E9': true, '\u3009': true, '\u276D': true,
}
