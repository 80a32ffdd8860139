package record

import "testing"

// A sealed record opens under its key only, and not once a byte of it,
// its prefix or its key changes.
func TestSealedRecord(t *testing.T) {
	key := Key(make([]byte, 32))
	line := Seal(key, GenPrefix, `{"generation":1}`)
	rest := line[len(GenPrefix):]
	if body, ok := Open(key, GenPrefix, rest); !ok || body != `{"generation":1}` {
		t.Fatalf("Open(its own seal) = %q, %v", body, ok)
	}
	other := Key(append(make([]byte, 31), 1))
	for name, try := range map[string]func() bool{
		"another key":    func() bool { _, ok := Open(other, GenPrefix, rest); return ok },
		"another prefix": func() bool { _, ok := Open(key, MarkPrefix, rest); return ok },
		"a body changed": func() bool {
			_, ok := Open(key, GenPrefix, rest[:len(rest)-2]+"2}")
			return ok
		},
		"no MAC":    func() bool { _, ok := Open(key, GenPrefix, `{"generation":1}`); return ok },
		"no key":    func() bool { _, ok := Open(nil, GenPrefix, rest); return ok },
		"MAC short": func() bool { _, ok := Open(key, GenPrefix, rest[1:]); return ok },
	} {
		if try() {
			t.Errorf("%s: the record opened", name)
		}
	}
}
