package runtime

import "testing"

// TestFoldOf: a reduction hands the schedules the fold of its type and op,
// and none where the op does not fit the type.
func TestFoldOf(t *testing.T) {
	for typ := Bytes; typ <= Float64+1; typ++ {
		for op := Sum; op <= Bxor+1; op++ {
			f := foldOf(typ, op)
			switch {
			case Fits(typ, op) && (f == nil || f.Elem() != typ.Size()):
				t.Errorf("foldOf(%s, %s) = %v, want the fold of %d-byte elements", typ, op, f, typ.Size())
			case !Fits(typ, op) && f != nil:
				t.Errorf("foldOf(%s, %s) = %v, want nil", typ, op, f)
			}
		}
	}
}
