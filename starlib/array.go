package starlib

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"unsafe"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// Array is the Starlark module array: typed arrays held as bytes, the form
// in which the collectives of comm take and return data (SPEC §8.2).
//
// An array is a bytes value holding elements of one type, each stored
// least significant byte first (little-endian):
//
//	type     element size  Starlark values
//	bytes    1             int, 0 … 255
//	int32    4             int, -2147483648 … 2147483647
//	int64    8             int, -9223372036854775808 … 9223372036854775807
//	uint32   4             int, 0 … 4294967295
//	uint64   8             int, 0 … 18446744073709551615
//	float32  4             float or int (IEEE 754 binary32)
//	float64  8             float or int (IEEE 754 binary64)
//
// The module defines:
//
//	pack(type, values) - Returns the bytes of the array of the given type
//	    whose elements are values, a list, tuple or other iterable. Every
//	    element of a whole-number type (and of "bytes") must be an int within
//	    the type's range; nothing wraps around. An element of a float type may
//	    be a float or an int; float32 rounds to the nearest binary32 value, but
//	    a finite value too large for the type is an error. inf, -inf and nan
//	    are kept, NaN payloads too. An error names the element:
//	        array.pack: element 3 is 2147483648, out of range for int32
//	unpack(type, data) - Returns a new list of the elements of the array data
//	    (bytes, or a string taken as its bytes). Whole-number types give ints,
//	    float types give floats. A length of data that is no whole number of
//	    elements is an error.
//	size(type) - Returns the size in bytes of one element of the type.
//	types - The tuple of type names, in the order of the table above.
//
// An unknown type name is an error that lists the valid names.
//
// Example:
//
//	data = array.pack("int64", [1, 2, 3])   # 24 bytes
//	total = comm.allreduce("int64", "sum", data)
//	print(array.unpack("int64", total))
//
// Packing and unpacking cost tens of nanoseconds per element, a small part
// of what a Starlark loop over the elements costs. Unpacking whole numbers
// outside -2147483648 … 2147483647 costs most (about 100ns each), because
// each becomes a big integer; smaller whole numbers allocate nothing.
var Array = &starlarkstruct.Module{
	Name: "array",
	Members: starlark.StringDict{
		"pack":   starlark.NewBuiltin("array.pack", arrayPack),
		"unpack": starlark.NewBuiltin("array.unpack", arrayUnpack),
		"size":   starlark.NewBuiltin("array.size", arraySize),
		"types":  arrayTypes(),
	},
}

// elemType is an element type of SPEC §8.2.
type elemType uint8

const (
	typBytes elemType = iota
	typInt32
	typInt64
	typUint32
	typUint64
	typFloat32
	typFloat64
	numTypes
)

var typeNames = [numTypes]string{"bytes", "int32", "int64", "uint32", "uint64", "float32", "float64"}
var typeSizes = [numTypes]int{1, 4, 8, 4, 8, 4, 8}

func (t elemType) String() string { return typeNames[t] }
func (t elemType) size() int      { return typeSizes[t] }
func (t elemType) isFloat() bool  { return t == typFloat32 || t == typFloat64 }

func lookupType(name string) (elemType, bool) {
	for t, n := range typeNames {
		if n == name {
			return elemType(t), true
		}
	}
	return 0, false
}

// ElemSize returns the size in bytes of one element of the array type typ
// ("bytes", "int32", "int64", "uint32", "uint64", "float32" or "float64"),
// and false for any other name.
func ElemSize(typ string) (int, bool) {
	t, ok := lookupType(typ)
	if !ok {
		return 0, false
	}
	return t.size(), true
}

func arrayTypes() starlark.Tuple {
	names := make(starlark.Tuple, numTypes)
	for i, n := range typeNames {
		names[i] = starlark.String(n)
	}
	return names
}

// parseType resolves a type name given to builtin fn.
func parseType(fn, name string) (elemType, error) {
	t, ok := lookupType(name)
	if !ok {
		return 0, fmt.Errorf("%s: unknown type %q, want one of %s", fn, name, strings.Join(typeNames[:], ", "))
	}
	return t, nil
}

func arraySize(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &name); err != nil {
		return nil, err
	}
	t, err := parseType(b.Name(), name)
	if err != nil {
		return nil, err
	}
	return starlark.MakeInt(t.size()), nil
}

func arrayPack(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	var values starlark.Iterable
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "type", &name, "values", &values); err != nil {
		return nil, err
	}
	t, err := parseType(b.Name(), name)
	if err != nil {
		return nil, err
	}
	buf, err := pack(t, values)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", b.Name(), err)
	}
	if len(buf) == 0 {
		return starlark.Bytes(""), nil
	}
	// buf is never written again, so the bytes value may share it; copying
	// would cost as much as packing.
	return starlark.Bytes(unsafe.String(&buf[0], len(buf))), nil
}

// pack encodes values as an array of type t.
func pack(t elemType, values starlark.Iterable) ([]byte, error) {
	// Sequences are read by index, with no iterator, and list and tuple
	// get loops of their own, with no interface call per element.
	switch v := values.(type) {
	case starlark.Tuple:
		return packSeq(t, v)
	case *starlark.List:
		return packSeq(t, v)
	case starlark.Indexable:
		return packSeq(t, v)
	}
	// Any other iterable (a set, a dict) is collected first.
	var elems starlark.Tuple
	if n := starlark.Len(values); n > 0 {
		elems = make(starlark.Tuple, 0, n)
	}
	iter := values.Iterate()
	defer iter.Done()
	var x starlark.Value
	for iter.Next(&x) {
		elems = append(elems, x)
	}
	return packSeq(t, elems)
}

type sequence interface {
	Len() int
	Index(i int) starlark.Value
}

// packSeq encodes the elements of s as an array of type t.
func packSeq[S sequence](t elemType, s S) ([]byte, error) {
	n := s.Len()
	buf := make([]byte, n*t.size())
	le := binary.LittleEndian
	switch t {
	case typBytes, typInt32, typUint32, typInt64:
		lo, hi := intRange(t)
		for i := range n {
			x := s.Index(i)
			v, ok := asInt64(x)
			if !ok || v < lo || v > hi {
				return nil, badElem(t, i, x)
			}
			switch t {
			case typBytes:
				buf[i] = byte(v)
			case typInt32, typUint32:
				le.PutUint32(buf[4*i:], uint32(v))
			default:
				le.PutUint64(buf[8*i:], uint64(v))
			}
		}
	case typUint64:
		for i := range n {
			x := s.Index(i)
			v, ok := asUint64(x)
			if !ok {
				return nil, badElem(t, i, x)
			}
			le.PutUint64(buf[8*i:], v)
		}
	case typFloat64:
		for i := range n {
			x := s.Index(i)
			f, ok := asFloat(x)
			if !ok {
				return nil, badElem(t, i, x)
			}
			le.PutUint64(buf[8*i:], math.Float64bits(f))
		}
	case typFloat32:
		for i := range n {
			x := s.Index(i)
			f, ok := asFloat(x)
			f32 := float32(f)
			if !ok || math.IsInf(float64(f32), 0) && !math.IsInf(f, 0) {
				return nil, badElem(t, i, x)
			}
			if f != f {
				f32 = nan64to32(f)
			}
			le.PutUint32(buf[4*i:], math.Float32bits(f32))
		}
	}
	return buf, nil
}

// nan32to64 and nan64to32 convert NaNs between float32 and float64 keeping
// sign, quiet bit and the high bits of the payload, so that unpacking and
// packing float32 data gives back the same bytes. The hardware conversion
// makes a signaling NaN quiet.
func nan32to64(f float32) float64 {
	b := uint64(math.Float32bits(f))
	return math.Float64frombits(b>>31<<63 | 0x7ff<<52 | (b&(1<<23-1))<<29)
}

func nan64to32(f float64) float32 {
	b := math.Float64bits(f)
	mant := uint32(b>>29) & (1<<23 - 1)
	if mant == 0 {
		mant = 1 << 22 // the payload was all in the low bits: a quiet NaN
	}
	return math.Float32frombits(uint32(b>>63)<<31 | 0xff<<23 | mant)
}

// intRange returns the bounds of the whole-number type t, uint64 excepted.
func intRange(t elemType) (lo, hi int64) {
	switch t {
	case typBytes:
		return 0, math.MaxUint8
	case typInt32:
		return math.MinInt32, math.MaxInt32
	case typUint32:
		return 0, math.MaxUint32
	}
	return math.MinInt64, math.MaxInt64
}

func asInt64(x starlark.Value) (int64, bool) {
	if n, ok := x.(starlark.Int); ok {
		return n.Int64()
	}
	return 0, false
}

func asUint64(x starlark.Value) (uint64, bool) {
	if n, ok := x.(starlark.Int); ok {
		return n.Uint64()
	}
	return 0, false
}

// asFloat returns the float value of a float or int, and false for any
// other value and for an int too large for a float64.
func asFloat(x starlark.Value) (float64, bool) {
	switch x := x.(type) {
	case starlark.Float:
		return float64(x), true
	case starlark.Int:
		f := float64(x.Float())
		return f, !math.IsInf(f, 0)
	}
	return 0, false
}

// badElem returns the error for x, element i, which is of the wrong type or
// out of range for t.
func badElem(t elemType, i int, x starlark.Value) error {
	_, isInt := x.(starlark.Int)
	_, isFloat := x.(starlark.Float)
	switch {
	case t.isFloat() && !isInt && !isFloat:
		return &elemError{i, fmt.Sprintf("has type %s, want float or int for %s", x.Type(), t)}
	case !t.isFloat() && !isInt:
		return &elemError{i, fmt.Sprintf("has type %s, want int for %s", x.Type(), t)}
	}
	return &elemError{i, fmt.Sprintf("is %s, out of range for %s", x, t)}
}

// An elemError is a bad element of values given to pack.
type elemError struct {
	index int
	what  string
}

func (e *elemError) Error() string { return fmt.Sprintf("element %d %s", e.index, e.what) }

func arrayUnpack(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	var data starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "type", &name, "data", &data); err != nil {
		return nil, err
	}
	t, err := parseType(b.Name(), name)
	if err != nil {
		return nil, err
	}
	s, err := stringOf(data)
	if err != nil {
		return nil, fmt.Errorf("%s: for parameter data: %v", b.Name(), err)
	}
	elems, err := unpack(t, s)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", b.Name(), err)
	}
	return starlark.NewList(elems), nil
}

// unpack decodes the array s of type t.
func unpack(t elemType, s string) ([]starlark.Value, error) {
	size := t.size()
	if len(s)%size != 0 {
		return nil, fmt.Errorf("data of %d bytes is no whole number of %s elements of %d bytes", len(s), t, size)
	}
	n := len(s) / size
	elems := make([]starlark.Value, n)
	if n == 0 {
		return elems, nil
	}
	// Read s in place: it is immutable and only read here.
	b := unsafe.Slice(unsafe.StringData(s), len(s))
	le := binary.LittleEndian
	switch t {
	case typBytes:
		for i, c := range b {
			elems[i] = starlark.MakeInt(int(c))
		}
	case typInt32:
		for i := range elems {
			elems[i] = starlark.MakeInt64(int64(int32(le.Uint32(b[4*i:]))))
		}
	case typUint32:
		for i := range elems {
			elems[i] = starlark.MakeUint64(uint64(le.Uint32(b[4*i:])))
		}
	case typInt64:
		for i := range elems {
			elems[i] = starlark.MakeInt64(int64(le.Uint64(b[8*i:])))
		}
	case typUint64:
		for i := range elems {
			elems[i] = starlark.MakeUint64(le.Uint64(b[8*i:]))
		}
	case typFloat32:
		for i := range elems {
			f := math.Float32frombits(le.Uint32(b[4*i:]))
			if f != f {
				elems[i] = starlark.Float(nan32to64(f))
				continue
			}
			elems[i] = starlark.Float(f)
		}
	case typFloat64:
		for i := range elems {
			elems[i] = starlark.Float(math.Float64frombits(le.Uint64(b[8*i:])))
		}
	}
	return elems, nil
}
