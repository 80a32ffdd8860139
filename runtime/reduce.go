package runtime

import (
	"fmt"
	"unsafe"

	"sperli/runtime/sched"
)

// Type is an element type of SPEC §8.2. The numbers travel in call
// descriptors: append only.
type Type uint8

// Element types.
const (
	Bytes   Type = 1
	Int32   Type = 2
	Int64   Type = 3
	Uint32  Type = 4
	Uint64  Type = 5
	Float32 Type = 6
	Float64 Type = 7
)

// Op is a reduction of SPEC §8.2. The numbers travel in call descriptors:
// append only.
type Op uint8

// Reductions.
const (
	Sum  Op = 1
	Prod Op = 2
	Min  Op = 3
	Max  Op = 4
	Land Op = 5
	Lor  Op = 6
	Lxor Op = 7
	Band Op = 8
	Bor  Op = 9
	Bxor Op = 10
)

var typeNames = [...]string{Bytes: "bytes", Int32: "int32", Int64: "int64", Uint32: "uint32", Uint64: "uint64", Float32: "float32", Float64: "float64"}
var typeSizes = [...]int{Bytes: 1, Int32: 4, Int64: 8, Uint32: 4, Uint64: 8, Float32: 4, Float64: 8}
var opNames = [...]string{Sum: "sum", Prod: "prod", Min: "min", Max: "max", Land: "land", Lor: "lor", Lxor: "lxor", Band: "band", Bor: "bor", Bxor: "bxor"}

func (t Type) String() string {
	if t >= Bytes && t <= Float64 {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Size returns the size of one element in bytes, or 0 for an unknown type.
func (t Type) Size() int {
	if t >= Bytes && t <= Float64 {
		return typeSizes[t]
	}
	return 0
}

func (o Op) String() string {
	if o >= Sum && o <= Bxor {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// ParseType returns the type of a name ("int64"), or false.
func ParseType(s string) (Type, bool) {
	for t := Bytes; t <= Float64; t++ {
		if typeNames[t] == s {
			return t, true
		}
	}
	return 0, false
}

// ParseOp returns the reduction of a name ("sum"), or false.
func ParseOp(s string) (Op, bool) {
	for o := Sum; o <= Bxor; o++ {
		if opNames[o] == s {
			return o, true
		}
	}
	return 0, false
}

// Fits reports whether op is defined on t (the table of SPEC §8.2).
func Fits(t Type, op Op) bool {
	switch {
	case t.Size() == 0 || op < Sum || op > Bxor:
		return false
	case t == Bytes:
		return op >= Band
	case t == Float32 || t == Float64:
		return op <= Max
	}
	return true
}

func checkReduction(call string, t Type, op Op, n int) string {
	switch {
	case t.Size() == 0:
		return fmt.Sprintf("%s: element type %d is unknown", call, uint8(t))
	case op < Sum || op > Bxor:
		return fmt.Sprintf("%s: reduction %d is unknown", call, uint8(op))
	case !Fits(t, op):
		return fmt.Sprintf("%s: reduction %s does not fit type %s", call, op, t)
	case n%t.Size() != 0:
		return fmt.Sprintf("%s: %d bytes are no whole number of %s elements (%d bytes each)", call, n, t, t.Size())
	}
	return ""
}

// reduction is a typed reduction as the schedules fold it (sched.Fold).
type reduction struct {
	t  Type
	op Op
}

// reductions holds every pair of type and op, so that a call hands its
// schedule a pointer and allocates nothing.
var reductions = func() (all [Float64 + 1][Bxor + 1]reduction) {
	for t := range all {
		for op := range all[t] {
			all[t][op] = reduction{Type(t), Op(op)}
		}
	}
	return all
}()

// foldOf is the fold of op on t, or nil where op does not fit t (then the
// call is void and runs no schedule).
func foldOf(t Type, op Op) sched.Fold {
	if !Fits(t, op) {
		return nil
	}
	return &reductions[t][op]
}

var _ sched.Fold = (*reduction)(nil)

func (r *reduction) Elem() int { return r.t.Size() }

func (r *reduction) First(acc, x []byte) {
	copy(acc, x)
	if r.op == Land || r.op == Lor || r.op == Lxor {
		normalise(r.t, acc)
	}
}

func (r *reduction) Next(acc, x []byte) { Combine(r.t, r.op, acc, x) }

var littleEndian = func() bool { x := uint16(1); return *(*byte)(unsafe.Pointer(&x)) == 1 }()

// Combine sets acc[i] = acc[i] op x[i] for every element. acc and x have the
// same length, a whole number of elements; op fits t. On a little-endian
// machine with aligned slices it works in place on the native words; else
// it goes through aligned native copies.
func Combine(t Type, op Op, acc, x []byte) {
	n := t.Size()
	if littleEndian && sched.Aligned(acc, n) && sched.Aligned(x, n) {
		combineNative(t, op, acc, x)
		return
	}
	a, b := sched.AlignedBytes(len(acc)), sched.AlignedBytes(len(x))
	toNative(n, a, acc)
	toNative(n, b, x)
	combineNative(t, op, a, b)
	toNative(n, acc, a)
}

// combineNative works on aligned slices of native words.
func combineNative(t Type, op Op, acc, x []byte) {
	switch t {
	case Bytes:
		bitwise(op, acc, x)
	case Int32:
		combineInt(op, native[int32](acc), native[int32](x))
	case Int64:
		combineInt(op, native[int64](acc), native[int64](x))
	case Uint32:
		combineInt(op, native[uint32](acc), native[uint32](x))
	case Uint64:
		combineInt(op, native[uint64](acc), native[uint64](x))
	case Float32:
		combineFloat(op, native[float32](acc), native[float32](x))
	case Float64:
		combineFloat(op, native[float64](acc), native[float64](x))
	}
}

// toNative copies little-endian elements of size n from src to dst in the
// machine's order (a plain copy on a little-endian machine; the same
// function turns native words back into little-endian).
func toNative(n int, dst, src []byte) {
	if littleEndian || n == 1 {
		copy(dst, src)
		return
	}
	for i := 0; i+n <= len(src); i += n {
		for k := 0; k < n; k++ {
			dst[i+k] = src[i+n-1-k]
		}
	}
}

func native[T any](b []byte) []T {
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

type whole interface {
	~int32 | ~int64 | ~uint32 | ~uint64
}

type float interface{ ~float32 | ~float64 }

func b2i[T whole](b bool) T {
	if b {
		return 1
	}
	return 0
}

func combineInt[T whole](op Op, acc, x []T) {
	x = x[:len(acc)]
	switch op {
	case Sum:
		for i := range acc {
			acc[i] += x[i]
		}
	case Prod:
		for i := range acc {
			acc[i] *= x[i]
		}
	case Min:
		for i := range acc {
			acc[i] = min(acc[i], x[i])
		}
	case Max:
		for i := range acc {
			acc[i] = max(acc[i], x[i])
		}
	case Land:
		for i := range acc {
			acc[i] = b2i[T](acc[i] != 0 && x[i] != 0)
		}
	case Lor:
		for i := range acc {
			acc[i] = b2i[T](acc[i] != 0 || x[i] != 0)
		}
	case Lxor:
		for i := range acc {
			acc[i] = b2i[T]((acc[i] != 0) != (x[i] != 0))
		}
	case Band:
		for i := range acc {
			acc[i] &= x[i]
		}
	case Bor:
		for i := range acc {
			acc[i] |= x[i]
		}
	case Bxor:
		for i := range acc {
			acc[i] ^= x[i]
		}
	}
}

// combineFloat: min and max propagate NaN (a NaN on either side gives NaN,
// like IEEE 754-2019 minimum/maximum and numpy's minimum/maximum); between
// equal values (-0 and +0) the lower rank's is kept.
func combineFloat[T float](op Op, acc, x []T) {
	x = x[:len(acc)]
	switch op {
	case Sum:
		for i := range acc {
			acc[i] += x[i]
		}
	case Prod:
		for i := range acc {
			acc[i] *= x[i]
		}
	case Min:
		for i := range acc {
			a, b := acc[i], x[i]
			if b < a || b != b {
				acc[i] = b
			}
		}
	case Max:
		for i := range acc {
			a, b := acc[i], x[i]
			if b > a || b != b {
				acc[i] = b
			}
		}
	}
}

func bitwise(op Op, acc, x []byte) {
	x = x[:len(acc)]
	switch op {
	case Band:
		for i := range acc {
			acc[i] &= x[i]
		}
	case Bor:
		for i := range acc {
			acc[i] |= x[i]
		}
	case Bxor:
		for i := range acc {
			acc[i] ^= x[i]
		}
	}
}

// normalise turns every element into 0 or 1 (the start of a logical
// reduction, so that one rank's result is 0 or 1 too).
func normalise(t Type, b []byte) {
	n := t.Size()
	for i := 0; i+n <= len(b); i += n {
		nz := false
		for _, v := range b[i : i+n] {
			nz = nz || v != 0
		}
		for j := i; j < i+n; j++ {
			b[j] = 0
		}
		if nz {
			b[i] = 1
		}
	}
}
