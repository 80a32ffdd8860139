package runtime

import "testing"

// A sealed record opens under its key only, and not once a byte of it,
// its prefix or its key changes.
func TestSealedRecord(t *testing.T) {
	key := RecordKey(make([]byte, 32))
	line := SealRecord(key, GenPrefix, `{"generation":1}`)
	rest := line[len(GenPrefix):]
	if body, ok := OpenRecord(key, GenPrefix, rest); !ok || body != `{"generation":1}` {
		t.Fatalf("OpenRecord(its own seal) = %q, %v", body, ok)
	}
	other := RecordKey(append(make([]byte, 31), 1))
	for name, try := range map[string]func() bool{
		"another key":    func() bool { _, ok := OpenRecord(other, GenPrefix, rest); return ok },
		"another prefix": func() bool { _, ok := OpenRecord(key, MarkPrefix, rest); return ok },
		"a body changed": func() bool {
			_, ok := OpenRecord(key, GenPrefix, rest[:len(rest)-2]+"2}")
			return ok
		},
		"no MAC":    func() bool { _, ok := OpenRecord(key, GenPrefix, `{"generation":1}`); return ok },
		"no key":    func() bool { _, ok := OpenRecord(nil, GenPrefix, rest); return ok },
		"MAC short": func() bool { _, ok := OpenRecord(key, GenPrefix, rest[1:]); return ok },
	} {
		if try() {
			t.Errorf("%s: the record opened", name)
		}
	}
}
