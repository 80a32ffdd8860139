package starlib

import (
	"encoding/binary"
	"math"
	"testing"

	"go.starlark.net/starlark"
)

func TestElemSize(t *testing.T) {
	tests := []struct {
		typ  string
		size int
		ok   bool
	}{
		{"bytes", 1, true},
		{"int32", 4, true},
		{"int64", 8, true},
		{"uint32", 4, true},
		{"uint64", 8, true},
		{"float32", 4, true},
		{"float64", 8, true},
		{"int8", 0, false},
		{"", 0, false},
		{"INT32", 0, false},
	}
	for _, tt := range tests {
		if size, ok := ElemSize(tt.typ); size != tt.size || ok != tt.ok {
			t.Errorf("ElemSize(%q) = %d, %v, want %d, %v", tt.typ, size, ok, tt.size, tt.ok)
		}
	}
}

// callArray calls array.<fn>(args...).
func callArray(fn string, args ...starlark.Value) (starlark.Value, error) {
	return starlark.Call(&starlark.Thread{}, Array.Members[fn], args, nil)
}

func TestPackMatchesEncodingBinary(t *testing.T) {
	values := []int64{0, 1, -1, 1 << 31, -(1 << 31), math.MaxInt64, math.MinInt64, 1234567890123}
	list := make([]starlark.Value, len(values))
	want := make([]byte, 0, 8*len(values))
	for i, v := range values {
		list[i] = starlark.MakeInt64(v)
		want = binary.LittleEndian.AppendUint64(want, uint64(v))
	}
	got, err := callArray("pack", starlark.String("int64"), starlark.NewList(list))
	if err != nil {
		t.Fatal(err)
	}
	if string(got.(starlark.Bytes)) != string(want) {
		t.Errorf("pack(int64, %v) = %x, want %x", values, got, want)
	}
	back, err := callArray("unpack", starlark.String("int64"), got)
	if err != nil {
		t.Fatal(err)
	}
	if eq, err := starlark.Equal(back, starlark.NewList(list)); err != nil || !eq {
		t.Errorf("unpack(pack(%v)) = %v", values, back)
	}
}

func TestPackErrors(t *testing.T) {
	tests := []struct {
		typ    string
		values starlark.Value
		want   string
	}{
		{"int32", starlark.Tuple{starlark.MakeInt(0), starlark.MakeInt(1), starlark.MakeInt(2), starlark.MakeInt64(1 << 31)},
			"array.pack: element 3 is 2147483648, out of range for int32"},
		{"uint64", starlark.NewList([]starlark.Value{starlark.MakeInt(-1)}),
			"array.pack: element 0 is -1, out of range for uint64"},
		{"float32", starlark.Tuple{starlark.Float(1e300)},
			"array.pack: element 0 is 1e+300, out of range for float32"},
		{"int64", starlark.Tuple{starlark.Float(1)},
			"array.pack: element 0 has type float, want int for int64"},
		{"int16", starlark.Tuple{},
			"array.pack: unknown type \"int16\", want one of bytes, int32, int64, uint32, uint64, float32, float64"},
	}
	for _, tt := range tests {
		_, err := callArray("pack", starlark.String(tt.typ), tt.values)
		if err == nil || err.Error() != tt.want {
			t.Errorf("pack(%s, %v) error = %v, want %q", tt.typ, tt.values, err, tt.want)
		}
	}
}

// TestPackUnpackBits checks that float bit patterns of every class survive
// a round trip, NaN payloads included.
func TestPackUnpackBits(t *testing.T) {
	for _, bits := range []uint32{0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7fc00001, 0xffc12345, 0xffbd3030, 0x7f800001, 1, 0x7f7fffff} {
		data := binary.LittleEndian.AppendUint32(nil, bits)
		elems, err := unpack(typFloat32, string(data))
		if err != nil {
			t.Fatal(err)
		}
		got, err := pack(typFloat32, starlark.NewList(elems))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(data) {
			t.Errorf("float32 bits %#08x came back as %x", bits, got)
		}
	}
	for _, bits := range []uint64{0, 1 << 63, 0x7ff0000000000000, 0x7ff8000000000001, 0xfff8000000000000, 0x7ff4000000000000, 0x7ff0000000000001, 1} {
		data := binary.LittleEndian.AppendUint64(nil, bits)
		elems, err := unpack(typFloat64, string(data))
		if err != nil {
			t.Fatal(err)
		}
		got, err := pack(typFloat64, starlark.Tuple(elems))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(data) {
			t.Errorf("float64 bits %#016x came back as %x", bits, got)
		}
	}
}

// TestPackAllocs checks that packing allocates only its result, and that
// unpacking small whole numbers allocates only the list.
func TestPackAllocs(t *testing.T) {
	list := makeIntList(1000)
	if n := testing.AllocsPerRun(10, func() { pack(typInt64, list) }); n > 1 {
		t.Errorf("pack of 1000 int64 made %v allocations, want 1", n)
	}
	data, _ := pack(typInt64, list)
	s := string(data)
	if n := testing.AllocsPerRun(10, func() { unpack(typInt64, s) }); n > 1 {
		t.Errorf("unpack of 1000 small int64 made %v allocations, want 1", n)
	}
}

// FuzzUnpackPack checks that unpacking any data and packing the elements
// again gives the same bytes, for every type.
func FuzzUnpackPack(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0xc0, 0x7f, 0, 0, 0xf8, 0x7f})
	f.Add([]byte{0x30, 0x30, 0xbd, 0xff}) // a signaling float32 NaN
	f.Fuzz(func(t *testing.T, data []byte) {
		for typ := range numTypes {
			n := len(data) / typ.size() * typ.size()
			elems, err := unpack(typ, string(data[:n]))
			if err != nil {
				t.Fatalf("unpack(%s, %x): %v", typ, data[:n], err)
			}
			got, err := pack(typ, starlark.NewList(elems))
			if err != nil {
				t.Fatalf("pack(%s, unpack(%x)): %v", typ, data[:n], err)
			}
			if string(got) != string(data[:n]) {
				t.Errorf("pack(%s, unpack(%x)) = %x", typ, data[:n], got)
			}
			if n != len(data) {
				if _, err := unpack(typ, string(data)); err == nil {
					t.Errorf("unpack(%s) of %d bytes succeeded", typ, len(data))
				}
			}
		}
	})
}

const benchN = 1_000_000

func makeIntList(n int) *starlark.List {
	elems := make([]starlark.Value, n)
	for i := range elems {
		elems[i] = starlark.MakeInt(i)
	}
	return starlark.NewList(elems)
}

func makeFloatList(n int) *starlark.List {
	elems := make([]starlark.Value, n)
	for i := range elems {
		elems[i] = starlark.Float(float64(i) + 0.5)
	}
	return starlark.NewList(elems)
}

func makeBigIntList(n int) *starlark.List {
	elems := make([]starlark.Value, n)
	for i := range elems {
		elems[i] = starlark.MakeInt64(int64(i) + 1<<40)
	}
	return starlark.NewList(elems)
}

// benchPack packs values as typ b.N times through the Starlark builtin and
// reports the time per element.
func benchPack(b *testing.B, typ string, values starlark.Value) {
	thread := &starlark.Thread{}
	args := starlark.Tuple{starlark.String(typ), values}
	fn := Array.Members["pack"]
	b.SetBytes(int64(benchN * typeSizes[mustType(typ)]))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := starlark.Call(thread, fn, args, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchN, "ns/elem")
}

func benchUnpack(b *testing.B, typ string, values starlark.Value) {
	thread := &starlark.Thread{}
	data, err := starlark.Call(thread, Array.Members["pack"], starlark.Tuple{starlark.String(typ), values}, nil)
	if err != nil {
		b.Fatal(err)
	}
	args := starlark.Tuple{starlark.String(typ), data}
	fn := Array.Members["unpack"]
	b.SetBytes(int64(len(data.(starlark.Bytes))))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := starlark.Call(thread, fn, args, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchN, "ns/elem")
}

func mustType(name string) elemType {
	t, ok := lookupType(name)
	if !ok {
		panic(name)
	}
	return t
}

func BenchmarkPack(b *testing.B) {
	b.Run("int64", func(b *testing.B) { benchPack(b, "int64", makeIntList(benchN)) })
	b.Run("int64-big", func(b *testing.B) { benchPack(b, "int64", makeBigIntList(benchN)) })
	b.Run("int32", func(b *testing.B) { benchPack(b, "int32", makeIntList(benchN)) })
	b.Run("float64", func(b *testing.B) { benchPack(b, "float64", makeFloatList(benchN)) })
	b.Run("float64-tuple", func(b *testing.B) {
		benchPack(b, "float64", starlark.Tuple(unpackList(makeFloatList(benchN))))
	})
}

func BenchmarkUnpack(b *testing.B) {
	b.Run("int64", func(b *testing.B) { benchUnpack(b, "int64", makeIntList(benchN)) })
	b.Run("int64-big", func(b *testing.B) { benchUnpack(b, "int64", makeBigIntList(benchN)) })
	b.Run("int32", func(b *testing.B) { benchUnpack(b, "int32", makeIntList(benchN)) })
	b.Run("float64", func(b *testing.B) { benchUnpack(b, "float64", makeFloatList(benchN)) })
}

func unpackList(l *starlark.List) []starlark.Value {
	elems := make([]starlark.Value, l.Len())
	for i := range elems {
		elems[i] = l.Index(i)
	}
	return elems
}
