package sched

import "unsafe"

// foldAll folds contributions of one length in rank order into new bytes.
func foldAll(fold Fold, contrib [][]byte) []byte {
	acc := AlignedBytes(len(contrib[0]))
	fold.First(acc, contrib[0])
	e := fold.Elem()
	var scratch []byte
	for _, x := range contrib[1:] {
		if !Aligned(x, e) {
			if scratch == nil {
				scratch = AlignedBytes(len(x))
			}
			copy(scratch, x)
			x = scratch
		}
		fold.Next(acc, x)
	}
	return acc
}

// foldChecked is foldAll of the star's contributions, whose lengths the
// root checks first (H1613).
func foldChecked(l Link, fold Fold, contrib [][]byte) ([]byte, error) {
	if err := sameLengths(l, "reduce", contrib); err != nil {
		return nil, err
	}
	return foldAll(fold, contrib), nil
}

// AlignedBytes returns n bytes whose start is 8-byte aligned.
func AlignedBytes(n int) []byte {
	w := make([]uint64, (n+7)/8)
	if n == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), n)
}

// Aligned reports whether b starts at a multiple of size.
func Aligned(b []byte, size int) bool {
	return len(b) == 0 || uintptr(unsafe.Pointer(&b[0]))%uintptr(size) == 0
}
