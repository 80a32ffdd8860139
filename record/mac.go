package record

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Records a launched rank writes for its launcher on its standard output
// and standard error share those streams with the program's own lines,
// and a program can write anything there. The records that change what
// the launcher records or shows — the generation report (GenPrefix) and
// the generation mark (MarkPrefix) — therefore carry a MAC: HMAC-SHA256,
// cut to 16 bytes and written in hex, of the record's prefix and body,
// under a key only the rank's runtime and its launcher hold (Key,
// made from the rank's private key in its job description, which the
// program never sees: a Starlark program has no way to it). The launcher
// takes a record only when its MAC holds; any other line that begins
// with a record's prefix is the program's own, shown as it wrote it
// (docs/protocol.md §12.5).

// macLen is the length of a record's MAC in hex.
const macLen = 32

// Key is the key of the MACs of the records of the rank whose
// private key seed is seed.
func Key(seed []byte) []byte {
	h := sha256.New()
	h.Write([]byte("sperli record key 1\x00"))
	h.Write(seed)
	return h.Sum(nil)
}

func recordMAC(key []byte, prefix, body string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(prefix))
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil)[:macLen/2])
}

// Seal is the line (without its line end) of a record with this
// prefix and body under key.
func Seal(key []byte, prefix, body string) string {
	return prefix + recordMAC(key, prefix, body) + " " + body
}

// Open takes what follows prefix on a record's line (its line end
// trimmed) and returns the body when its MAC holds under key.
func Open(key []byte, prefix, rest string) (string, bool) {
	mac, body, ok := strings.Cut(rest, " ")
	if !ok || len(mac) != macLen || len(key) == 0 {
		return "", false
	}
	want := recordMAC(key, prefix, body)
	return body, hmac.Equal([]byte(mac), []byte(want))
}
