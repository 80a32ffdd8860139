package runtime_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sperli/codes"
	"sperli/runtime"
)

// The matrix of SPEC §8: every collective on 1, 2, 3 and 5 ranks, every
// (type, op) pair of the table of §8.2 for reduce and allreduce, checked
// against a reference computed here element by element from the bytes
// (encoding/binary and math, never runtime.Combine), in rank order
// ((r0 ∘ r1) ∘ r2) …; every invalid pair, wrong root, broken length and
// over-limit data is H1618 on every rank with the job going on; every
// mismatch is H1613 / H1612 and the job's prompt end.

// mType is an element type as this test knows it, independently of the
// runtime's tables.
type mType struct {
	t      runtime.Type
	name   string
	size   int
	signed bool
	float  bool
}

var mTypes = []mType{
	{runtime.Bytes, "bytes", 1, false, false},
	{runtime.Int32, "int32", 4, true, false},
	{runtime.Int64, "int64", 8, true, false},
	{runtime.Uint32, "uint32", 4, false, false},
	{runtime.Uint64, "uint64", 8, false, false},
	{runtime.Float32, "float32", 4, true, true},
	{runtime.Float64, "float64", 8, true, true},
}

var mOps = []struct {
	op   runtime.Op
	name string
}{
	{runtime.Sum, "sum"}, {runtime.Prod, "prod"}, {runtime.Min, "min"}, {runtime.Max, "max"},
	{runtime.Land, "land"}, {runtime.Lor, "lor"}, {runtime.Lxor, "lxor"},
	{runtime.Band, "band"}, {runtime.Bor, "bor"}, {runtime.Bxor, "bxor"},
}

// validPair is the table of SPEC §8.2, written out again.
func validPair(t mType, op runtime.Op) bool {
	arith := op == runtime.Sum || op == runtime.Prod || op == runtime.Min || op == runtime.Max
	logical := op == runtime.Land || op == runtime.Lor || op == runtime.Lxor
	bitwise := op == runtime.Band || op == runtime.Bor || op == runtime.Bxor
	switch {
	case t.name == "bytes":
		return bitwise
	case t.float:
		return arith
	}
	return arith || logical || bitwise
}

// getElem returns element i of b as its bit pattern (little-endian).
func getElem(b []byte, size, i int) uint64 {
	switch size {
	case 1:
		return uint64(b[i])
	case 4:
		return uint64(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return binary.LittleEndian.Uint64(b[8*i:])
}

func putElem(b []byte, size, i int, v uint64) {
	switch size {
	case 1:
		b[i] = byte(v)
	case 4:
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	default:
		binary.LittleEndian.PutUint64(b[8*i:], v)
	}
}

func widthMask(size int) uint64 {
	if size == 8 {
		return ^uint64(0)
	}
	return 1<<(8*size) - 1
}

// signExtend reads the low 8·size bits of v as a two's complement number.
func signExtend(v uint64, size int) int64 {
	s := 64 - 8*size
	return int64(v<<s) >> s
}

func bit(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// refWhole is a ∘ b for a whole-number (or bytes) element of t.
func refWhole(t mType, op runtime.Op, a, b uint64) uint64 {
	m := widthMask(t.size)
	less := func(x, y uint64) bool { // x < y in t's order
		if t.signed {
			return signExtend(x, t.size) < signExtend(y, t.size)
		}
		return x < y
	}
	switch op {
	case runtime.Sum:
		return (a + b) & m
	case runtime.Prod:
		return (a * b) & m // the low bits of a product do not depend on the high ones
	case runtime.Min:
		if less(b, a) {
			return b
		}
		return a
	case runtime.Max:
		if less(a, b) {
			return b
		}
		return a
	case runtime.Land:
		return bit(a != 0 && b != 0)
	case runtime.Lor:
		return bit(a != 0 || b != 0)
	case runtime.Lxor:
		return bit((a != 0) != (b != 0))
	case runtime.Band:
		return a & b
	case runtime.Bor:
		return a | b
	case runtime.Bxor:
		return a ^ b
	}
	panic("op")
}

// fmin and fmax are the NaN rule of runtime/reduce.go, written out: a NaN
// on either side gives NaN, the NaN of the later rank when both are NaN;
// between equal values (-0, +0) the earlier rank's is kept.
func fmin[F float32 | float64](a, b F) F {
	switch {
	case b != b:
		return b
	case a != a:
		return a
	case b < a:
		return b
	}
	return a
}

func fmax[F float32 | float64](a, b F) F {
	switch {
	case b != b:
		return b
	case a != a:
		return a
	case b > a:
		return b
	}
	return a
}

func refFloat[F float32 | float64](op runtime.Op, a, b F) F {
	switch op {
	case runtime.Sum:
		return a + b
	case runtime.Prod:
		return a * b
	case runtime.Min:
		return fmin(a, b)
	case runtime.Max:
		return fmax(a, b)
	}
	panic("op")
}

// refElem is a ∘ b on bit patterns of t.
func refElem(t mType, op runtime.Op, a, b uint64) uint64 {
	switch {
	case t.float && t.size == 4:
		return uint64(math.Float32bits(refFloat(op, math.Float32frombits(uint32(a)), math.Float32frombits(uint32(b)))))
	case t.float:
		return math.Float64bits(refFloat(op, math.Float64frombits(a), math.Float64frombits(b)))
	}
	return refWhole(t, op, a, b)
}

// refReduce folds the contributions in rank order, ((r0 ∘ r1) ∘ r2) ….
func refReduce(t mType, op runtime.Op, contrib [][]byte) []byte {
	out := make([]byte, len(contrib[0]))
	n := len(out) / t.size
	logical := op == runtime.Land || op == runtime.Lor || op == runtime.Lxor
	for i := 0; i < n; i++ {
		acc := getElem(contrib[0], t.size, i)
		if logical {
			acc = bit(acc != 0) // one rank's result is 0 or 1 too
		}
		for _, c := range contrib[1:] {
			acc = refElem(t, op, acc, getElem(c, t.size, i))
		}
		putElem(out, t.size, i, acc)
	}
	return out
}

func f32(x float32) uint64 { return uint64(math.Float32bits(x)) }
func f64(x float64) uint64 { return math.Float64bits(x) }

// orderF64 and orderF32 are the order-dependent float sums: summed in rank
// order, ((1e16 + 1) − 1e16) + 1 + 1 … differs from every other order.
var (
	orderF64 = []float64{1e16, 1, -1e16, 1, 1}
	orderF32 = []float32{1e8, 1, -1e8, 1, 1}
)

// contribution returns rank r's data for (t, op) in a job of n ranks: a
// few elements chosen to hit the edges — values near the top and bottom
// of every whole type (sum and prod wrap around), elements that are zero
// on some ranks only (logical ops), bit patterns, the order-dependent
// float sum, NaN, ±0 and ±inf for min and max.
func contribution(t mType, op runtime.Op, r, n int) []byte {
	var v []uint64
	switch {
	case t.name == "bytes":
		v = []uint64{0xff - uint64(r), uint64(r), 0x55 ^ uint64(r*17), 0x80 >> (r % 8), 0x0f << (r % 5), uint64(r*37+11) & 0xff, 0}
	case !t.float:
		bits := 8 * t.size
		m := widthMask(t.size)
		hi, lo := m, uint64(0) // the largest and smallest values as bit patterns
		if t.signed {
			hi, lo = m>>1, (m>>1)+1
		}
		ur := uint64(r)
		v = []uint64{
			(hi - ur) & m,                 // sum wraps past the top
			(lo + ur) & m,                 // sum wraps past the bottom (signed)
			-(ur + 1) & m,                 // -1, -2, …: huge when unsigned
			ur,                            // zero on rank 0
			ur % 2,                        // zero on even ranks
			(ur%2 ^ 1) << (bits - 1),      // only the top bit: non-zero with zero low bytes
			(1<<(bits/2) + ur) & m,        // prod wraps: (2^(w/2))² ≡ 0
			3 + 2*ur,                      // odd factors, prod wraps after a few ranks
			(0x5555555555555555 >> r) & m, // bit patterns
			(hi/2 + 1 + ur) & m,           // prod of two wraps
			bit(r != n-1) * (ur + 1),      // non-zero on every rank but the last
			(0x100 << (r % 3)) & m,        // non-zero, low byte zero
			hi, lo,                        // the extremes themselves
		}
	case op == runtime.Sum || op == runtime.Prod:
		sign := math.Copysign(1, float64(1-2*(r%2))) // +1 on even ranks, -1 on odd
		if t.size == 4 {
			inf := float32(1) // inf on rank 0 only: no inf·0 or inf-inf, which would be NaN
			if r == 0 {
				inf = float32(math.Inf(1))
			}
			v = []uint64{f32(orderF32[r]), f32(0.1 * float32(r+1)), f32(float32(sign) / 3), f32(math.MaxFloat32), f32(1.5 + float32(r)), f32(float32(math.Copysign(0, sign))), f32(inf)}
		} else {
			v = []uint64{f64(orderF64[r]), f64(0.1 * float64(r+1)), f64(sign / 3), f64(math.MaxFloat64), f64(1.5 + float64(r)), f64(math.Copysign(0, sign)), f64(math.SmallestNonzeroFloat64 * float64(r+1))}
		}
	default: // min, max
		nan32 := func(p int) uint64 { return uint64(0x7fc00000 | uint32(p+1)) }
		nan64 := func(p int) uint64 { return 0x7ff8000000000000 | uint64(p+1) }
		pick := func(x32, x64 uint64) uint64 {
			if t.size == 4 {
				return x32
			}
			return x64
		}
		num := func(x float64) uint64 { return pick(f32(float32(x)), f64(x)) }
		nan := func(p int) uint64 { return pick(nan32(p), nan64(p)) }
		negz := pick(f32(float32(math.Copysign(0, -1))), f64(math.Copysign(0, -1)))
		posz := pick(0, 0)
		v = []uint64{
			num(float64(r) - float64(n)/2), // plain numbers
			num(float64(r * r)),
			num(1.25 * float64(r)),
		}
		if r == 0 {
			v = append(v, nan(r)) // NaN on rank 0 only
		} else {
			v = append(v, num(-float64(r)))
		}
		if r == n-1 {
			v = append(v, nan(r)) // NaN on the last rank only
		} else {
			v = append(v, num(float64(r)))
		}
		v = append(v, nan(r)) // NaN everywhere, each rank its own payload
		if r%2 == 0 {
			v = append(v, negz, posz) // -0 / +0 ties: the earlier rank's is kept
		} else {
			v = append(v, posz, negz)
		}
		v = append(v, num(math.Inf(1-2*(r%2))), num(math.Inf(-1+2*(r%2))))
		if r == 1 {
			v = append(v, nan(9)) // NaN in the middle
		} else {
			v = append(v, num(float64(7-r)))
		}
	}
	b := make([]byte, len(v)*t.size)
	for i, x := range v {
		putElem(b, t.size, i, x)
	}
	return b
}

// misaligned returns a copy of b that starts one byte into its array, so
// that the runtime meets data at every alignment.
func misaligned(b []byte) []byte {
	m := make([]byte, len(b)+1)
	copy(m[1:], b)
	return m[1:]
}

// matrixFail collects the failures of one rank's run through the matrix.
type matrixFail struct{ lines []string }

func (m *matrixFail) add(format string, args ...any) {
	if len(m.lines) < 40 {
		m.lines = append(m.lines, fmt.Sprintf(format, args...))
	}
}

func (m *matrixFail) err() error {
	if len(m.lines) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(m.lines, "\n"))
}

// isCode says whether err is code with a text that starts with it.
func isCode(err error, code codes.Code) bool {
	return codes.Of(err) == code && strings.HasPrefix(err.Error(), code.String()+": ")
}

// checkGoesOn makes a valid allreduce after a wrong call and checks it.
func checkGoesOn(ctx context.Context, c *runtime.Comm, f *matrixFail, after string) bool {
	n := c.Size()
	got, err := c.Allreduce(ctx, runtime.Int32, runtime.Sum, binary.LittleEndian.AppendUint32(nil, uint32(c.Rank()+1)))
	want := binary.LittleEndian.AppendUint32(nil, uint32(n*(n+1)/2))
	if err != nil || !bytes.Equal(got, want) {
		f.add("after %s: allreduce(int32, sum) = %x, %v; want %x, nil", after, got, err, want)
		return false
	}
	return true
}

// reduceMatrix runs reduce and allreduce for every (type, op) pair on this
// rank. All ranks make the same calls in the same order.
func reduceMatrix(ctx context.Context, c *runtime.Comm, f *matrixFail) {
	n, r := c.Size(), c.Rank()
	call := 0
	for _, t := range mTypes {
		for _, o := range mOps {
			call++
			root := call % n
			all := make([][]byte, n)
			for q := range all {
				all[q] = contribution(t, o.op, q, n)
			}
			mine := all[r]
			if r%2 == 1 {
				mine = misaligned(mine)
			}
			orig := bytes.Clone(mine)
			valid := validPair(t, o.op)
			var want []byte
			if valid {
				want = refReduce(t, o.op, all)
			}
			for _, allr := range []bool{false, true} {
				name := fmt.Sprintf("reduce(root %d, %s, %s)", root, t.name, o.name)
				var got []byte
				var err error
				if allr {
					name = fmt.Sprintf("allreduce(%s, %s)", t.name, o.name)
					got, err = c.Allreduce(ctx, t.t, o.op, mine)
				} else {
					got, err = c.Reduce(ctx, root, t.t, o.op, mine)
				}
				if !bytes.Equal(mine, orig) {
					f.add("%s changed its data: %x, was %x", name, mine, orig)
				}
				if !valid {
					if !isCode(err, codes.WrongCollective) {
						f.add("%s = %x, %v; want H1618 (the pair does not fit)", name, got, err)
						return
					}
					if !checkGoesOn(ctx, c, f, name) {
						return
					}
					continue
				}
				if err != nil {
					f.add("%s = %v, want success", name, err)
					return
				}
				w := want
				if !allr && r != root {
					w = []byte{}
				}
				if !bytes.Equal(got, w) {
					f.add("%s on %d ranks = %x, want %x", name, n, got, w)
				}
				if len(got) > 0 {
					got[0] ^= 0xff // the result is new bytes: the data stays
					if !bytes.Equal(mine, orig) {
						f.add("%s returned the data's own bytes", name)
					}
				}
			}
		}
	}
	// Unknown types and reductions are wrong calls too.
	for _, bad := range []struct {
		t  runtime.Type
		op runtime.Op
	}{{0, runtime.Sum}, {8, runtime.Sum}, {255, runtime.Bor}, {runtime.Int64, 0}, {runtime.Int64, 11}, {runtime.Bytes, 255}} {
		name := fmt.Sprintf("allreduce(type %d, op %d)", bad.t, bad.op)
		if _, err := c.Allreduce(ctx, bad.t, bad.op, make([]byte, 8)); !isCode(err, codes.WrongCollective) {
			f.add("%s = %v, want H1618", name, err)
			return
		}
		name = fmt.Sprintf("reduce(root 0, type %d, op %d)", bad.t, bad.op)
		if _, err := c.Reduce(ctx, 0, bad.t, bad.op, make([]byte, 8)); !isCode(err, codes.WrongCollective) {
			f.add("%s = %v, want H1618", name, err)
			return
		}
		if !checkGoesOn(ctx, c, f, name) {
			return
		}
	}
}

// TestRefMatrixData checks the reference and the data themselves against
// figures worked out by hand, so that the matrix does not merely agree
// with itself.
func TestRefMatrixData(t *testing.T) {
	i32, u32, i64, u64 := mTypes[1], mTypes[3], mTypes[2], mTypes[4]
	le32 := func(v ...uint32) [][]byte {
		var out [][]byte
		for _, x := range v {
			out = append(out, binary.LittleEndian.AppendUint32(nil, x))
		}
		return out
	}
	le64 := func(v ...uint64) [][]byte {
		var out [][]byte
		for _, x := range v {
			out = append(out, binary.LittleEndian.AppendUint64(nil, x))
		}
		return out
	}
	for _, tc := range []struct {
		name string
		t    mType
		op   runtime.Op
		in   [][]byte
		want []byte
	}{
		{"int32 max+max", i32, runtime.Sum, le32(math.MaxInt32, math.MaxInt32), le32(0xfffffffe)[0]},
		{"int32 min+(-1)", i32, runtime.Sum, le32(0x80000000, 0xffffffff), le32(math.MaxInt32)[0]},
		{"int32 65536·65536", i32, runtime.Prod, le32(65536, 65536), le32(0)[0]},
		{"int32 min·(-1)", i32, runtime.Prod, le32(0x80000000, 0xffffffff), le32(0x80000000)[0]},
		{"int32 min(-1, 1)", i32, runtime.Min, le32(0xffffffff, 1), le32(0xffffffff)[0]},
		{"uint32 min(2^32-1, 1)", u32, runtime.Min, le32(0xffffffff, 1), le32(1)[0]},
		{"uint32 max+1", u32, runtime.Sum, le32(0xffffffff, 1), le32(0)[0]},
		{"int64 max+1", i64, runtime.Sum, le64(math.MaxInt64, 1), le64(1 << 63)[0]},
		{"int64 2^32·2^32", i64, runtime.Prod, le64(1<<32, 1<<32), le64(0)[0]},
		{"uint64 3·(2^63+1)", u64, runtime.Prod, le64(3, 1<<63+1), le64(1<<63 + 3)[0]},
		{"int64 land(2^63, 1)", i64, runtime.Land, le64(1<<63, 1), le64(1)[0]},
		{"int64 lxor one rank", i64, runtime.Lxor, le64(256), le64(1)[0]},
		{"uint32 lor(0, 0)", u32, runtime.Lor, le32(0, 0), le32(0)[0]},
	} {
		if got := refReduce(tc.t, tc.op, tc.in); !bytes.Equal(got, tc.want) {
			t.Errorf("refReduce(%s) = %x, want %x", tc.name, got, tc.want)
		}
	}
	// The order-dependent sums: rank order gives these, and another order
	// gives something else.
	f64t, f32t := mTypes[6], mTypes[5]
	for _, n := range []int{3, 5} {
		var in64, in32 [][]byte
		for r := 0; r < n; r++ {
			in64 = append(in64, contribution(f64t, runtime.Sum, r, n))
			in32 = append(in32, contribution(f32t, runtime.Sum, r, n))
		}
		got64 := math.Float64frombits(getElem(refReduce(f64t, runtime.Sum, in64), 8, 0))
		got32 := math.Float32frombits(uint32(getElem(refReduce(f32t, runtime.Sum, in32), 4, 0)))
		want := float64(n - 3) // ((1e16 + 1) - 1e16) is 0, then +1 per rank after the third
		if got64 != want || float64(got32) != want {
			t.Errorf("order-dependent sum on %d ranks = %v (float64), %v (float32), want %v", n, got64, got32, want)
		}
		// Rank 2 first: (-1e16 + 1e16) + 1 + … is one more.
		rev64, rev32 := orderF64[2], orderF32[2]
		for r := 0; r < n; r++ {
			if r != 2 {
				rev64 += orderF64[r]
				rev32 += orderF32[r]
			}
		}
		if rev64 == got64 || rev32 == got32 {
			t.Errorf("on %d ranks another order gives %v / %v too: the data do not depend on order", n, rev64, rev32)
		}
	}
	// NaN in min/max: any NaN wins, the later rank's payload; ±0 keeps the
	// earlier rank's.
	negz := math.Copysign(0, -1)
	nanA, nanB := math.Float64frombits(0x7ff8000000000001), math.Float64frombits(0x7ff8000000000002)
	for _, tc := range []struct {
		op      runtime.Op
		a, b, w float64
	}{
		{runtime.Min, nanA, 1, nanA}, {runtime.Min, 1, nanA, nanA}, {runtime.Max, nanA, nanB, nanB},
		{runtime.Min, negz, 0, negz}, {runtime.Min, 0, negz, 0}, {runtime.Max, negz, 0, negz}, {runtime.Max, 0, negz, 0},
	} {
		if got := refFloat(tc.op, tc.a, tc.b); math.Float64bits(got) != math.Float64bits(tc.w) {
			t.Errorf("refFloat(%v, %v, %v) = %x, want %x", tc.op, tc.a, tc.b, math.Float64bits(got), math.Float64bits(tc.w))
		}
	}
}

// otherMatrix runs barrier, bcast, gather and scatter from every root.
func otherMatrix(ctx context.Context, c *runtime.Comm, f *matrixFail, entered []atomic.Int32) {
	n, r := c.Size(), c.Rank()
	for round := range entered {
		entered[round].Add(1)
		if err := c.Barrier(ctx); err != nil {
			f.add("barrier %d = %v", round, err)
			return
		}
		if got := entered[round].Load(); int(got) != n {
			f.add("barrier %d returned when %d of %d ranks had entered it", round, got, n)
		}
	}
	for root := 0; root < n; root++ {
		for _, l := range []int{0, 1, 13} {
			payload := make([]byte, l)
			for i := range payload {
				payload[i] = byte(root*31 + i)
			}
			// bcast: data off the root is ignored, whatever it is.
			data := []byte("ignored off the root")
			if r == root {
				data = payload
			}
			got, err := c.Bcast(ctx, root, data)
			if err != nil || !bytes.Equal(got, payload) {
				f.add("bcast(root %d) of %d bytes = %x, %v; want %x", root, l, got, err, payload)
			}
			// gather: contributions in rank order on the root.
			mine := make([]byte, l)
			for i := range mine {
				mine[i] = byte(r<<4 | i&0xf)
			}
			got, err = c.Gather(ctx, root, mine)
			want := []byte{}
			if r == root {
				for q := 0; q < n; q++ {
					for i := 0; i < l; i++ {
						want = append(want, byte(q<<4|i&0xf))
					}
				}
			}
			if err != nil || !bytes.Equal(got, want) {
				f.add("gather(root %d) of %d bytes = %x, %v; want %x", root, l, got, err, want)
			}
			// scatter: block q of the root's data to rank q.
			data = []byte("ignored")
			if r == root {
				data = make([]byte, n*l)
				for i := range data {
					data[i] = byte(i/l<<4 | i%l)
				}
			}
			orig := bytes.Clone(data)
			got, err = c.Scatter(ctx, root, data)
			want = make([]byte, l)
			for i := range want {
				want[i] = byte(r<<4 | i)
			}
			if err != nil || !bytes.Equal(got, want) {
				f.add("scatter(root %d) of %d-byte blocks = %x, %v; want %x", root, l, got, err, want)
			}
			if !bytes.Equal(data, orig) {
				f.add("scatter(root %d) changed its data", root)
			}
		}
	}
}

// TestCollectiveMatrix: every collective and every (type, op) pair on 1,
// 2, 3 and 5 ranks.
func TestCollectiveMatrix(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5} {
		t.Run(fmt.Sprintf("%d ranks", n), func(t *testing.T) {
			ctx := testCtx(t)
			comms := newFixture(t, n).initAll(ctx)
			entered := make([]atomic.Int32, 4)
			errs := each(comms, func(c *runtime.Comm) error {
				f := &matrixFail{}
				otherMatrix(ctx, c, f, entered)
				if f.err() == nil {
					reduceMatrix(ctx, c, f)
				}
				if err := f.err(); err != nil {
					return err
				}
				return c.Finish()
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d:\n%v", r, err)
				}
			}
		})
	}
}

// TestOrderDependentSum shows on the wire what the reference shows: the
// float sum of 1e16, 1, -1e16, 1, 1 in rank order, whichever rank is root.
func TestOrderDependentSum(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 5).initAll(ctx)
	errs := each(comms, func(c *runtime.Comm) error {
		r := c.Rank()
		for root := 0; root < 5; root++ {
			got, err := c.Reduce(ctx, root, runtime.Float64, runtime.Sum, binary.LittleEndian.AppendUint64(nil, math.Float64bits(orderF64[r])))
			if err != nil {
				return err
			}
			if r == root && math.Float64frombits(binary.LittleEndian.Uint64(got)) != 2 {
				return fmt.Errorf("reduce(root %d, float64, sum) of 1e16, 1, -1e16, 1, 1 = %v, want 2", root, math.Float64frombits(binary.LittleEndian.Uint64(got)))
			}
			got, err = c.Allreduce(ctx, runtime.Float32, runtime.Sum, binary.LittleEndian.AppendUint32(nil, math.Float32bits(orderF32[r])))
			if err != nil {
				return err
			}
			if v := math.Float32frombits(binary.LittleEndian.Uint32(got)); v != 2 {
				return fmt.Errorf("allreduce(float32, sum) of 1e8, 1, -1e8, 1, 1 = %v, want 2", v)
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// wrongCall is a call that every rank makes and every rank must answer
// with H1618.
type wrongCall struct {
	name string
	call func(ctx context.Context, c *runtime.Comm) error
}

func wrongCalls() []wrongCall {
	var calls []wrongCall
	for _, bad := range []func(n int) int{func(int) int { return -1 }, func(n int) int { return n }, func(n int) int { return n + 7 }} {
		calls = append(calls,
			wrongCall{"reduce with a root outside the job", func(ctx context.Context, c *runtime.Comm) error {
				_, err := c.Reduce(ctx, bad(c.Size()), runtime.Int64, runtime.Sum, i64s(1))
				return err
			}},
			wrongCall{"bcast with a root outside the job", func(ctx context.Context, c *runtime.Comm) error {
				_, err := c.Bcast(ctx, bad(c.Size()), []byte("x"))
				return err
			}},
			wrongCall{"gather with a root outside the job", func(ctx context.Context, c *runtime.Comm) error {
				_, err := c.Gather(ctx, bad(c.Size()), []byte("x"))
				return err
			}},
			wrongCall{"scatter with a root outside the job", func(ctx context.Context, c *runtime.Comm) error {
				_, err := c.Scatter(ctx, bad(c.Size()), make([]byte, c.Size()))
				return err
			}},
		)
	}
	oneRank := func(c *runtime.Comm, which int) bool { return c.Rank() == which%c.Size() }
	calls = append(calls,
		// A wrong root on one rank only: that rank voids the call.
		wrongCall{"reduce with a root outside the job on the last rank only", func(ctx context.Context, c *runtime.Comm) error {
			root := 0
			if oneRank(c, c.Size()-1) {
				root = c.Size()
			}
			_, err := c.Reduce(ctx, root, runtime.Int64, runtime.Sum, i64s(1))
			return err
		}},
		wrongCall{"bcast with root -1 on rank 1 only", func(ctx context.Context, c *runtime.Comm) error {
			root := 0
			if oneRank(c, 1) {
				root = -1
			}
			_, err := c.Bcast(ctx, root, []byte("x"))
			return err
		}},
	)
	for _, t := range mTypes {
		if t.size == 1 {
			continue
		}
		op := runtime.Sum
		calls = append(calls,
			wrongCall{fmt.Sprintf("allreduce of %d bytes of %s on every rank", t.size+1, t.name), func(ctx context.Context, c *runtime.Comm) error {
				_, err := c.Allreduce(ctx, t.t, op, make([]byte, t.size+1))
				return err
			}},
			wrongCall{fmt.Sprintf("reduce of %d bytes of %s on every rank", t.size-1, t.name), func(ctx context.Context, c *runtime.Comm) error {
				_, err := c.Reduce(ctx, c.Size()-1, t.t, op, make([]byte, t.size-1))
				return err
			}},
			wrongCall{fmt.Sprintf("allreduce of %d bytes of %s on the last rank only", 3*t.size-1, t.name), func(ctx context.Context, c *runtime.Comm) error {
				d := make([]byte, 3*t.size)
				if oneRank(c, c.Size()-1) {
					d = d[:len(d)-1]
				}
				_, err := c.Allreduce(ctx, t.t, op, d)
				return err
			}},
			wrongCall{fmt.Sprintf("reduce to rank 1 of %d bytes of %s on the root only", t.size+1, t.name), func(ctx context.Context, c *runtime.Comm) error {
				root := 1 % c.Size()
				d := make([]byte, t.size)
				if c.Rank() == root {
					d = make([]byte, t.size+1)
				}
				_, err := c.Reduce(ctx, root, t.t, op, d)
				return err
			}},
		)
	}
	over := runtime.MaxCollective + 8 // a whole number of every type
	calls = append(calls,
		wrongCall{"reduce over the limit on rank 1 only", func(ctx context.Context, c *runtime.Comm) error {
			d := make([]byte, 8)
			if oneRank(c, 1) {
				d = make([]byte, over)
			}
			_, err := c.Reduce(ctx, 0, runtime.Uint64, runtime.Bor, d)
			return err
		}},
		wrongCall{"allreduce over the limit on rank 0 (its root) only", func(ctx context.Context, c *runtime.Comm) error {
			d := make([]byte, 8)
			if c.Rank() == 0 {
				d = make([]byte, over)
			}
			_, err := c.Allreduce(ctx, runtime.Float64, runtime.Max, d)
			return err
		}},
		wrongCall{"gather over the limit on the last rank only", func(ctx context.Context, c *runtime.Comm) error {
			d := make([]byte, 8)
			if oneRank(c, c.Size()-1) {
				d = make([]byte, runtime.MaxCollective+1)
			}
			_, err := c.Gather(ctx, 0, d)
			return err
		}},
		wrongCall{"bcast over the limit on the root", func(ctx context.Context, c *runtime.Comm) error {
			root := c.Size() - 1
			var d []byte
			if c.Rank() == root {
				d = make([]byte, runtime.MaxCollective+1)
			}
			_, err := c.Bcast(ctx, root, d)
			return err
		}},
		wrongCall{"scatter over the limit on the root", func(ctx context.Context, c *runtime.Comm) error {
			var d []byte
			if c.Rank() == 0 {
				d = make([]byte, (runtime.MaxCollective/c.Size()+1)*c.Size()) // whole blocks, just over
			}
			_, err := c.Scatter(ctx, 0, d)
			return err
		}},
		wrongCall{"two wrong ranks with different reasons", func(ctx context.Context, c *runtime.Comm) error {
			d := i64s(1, 2)
			switch c.Rank() {
			case 0:
				d = d[:9]
			case c.Size() - 1:
				d = make([]byte, over)
			}
			_, err := c.Allreduce(ctx, runtime.Int64, runtime.Min, d)
			return err
		}},
	)
	return calls
}

// TestWrongCallsEveryRank: each wrong call is H1618 on every rank, on 1, 2,
// 3 and 5 ranks, and the next call succeeds.
func TestWrongCallsEveryRank(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5} {
		t.Run(fmt.Sprintf("%d ranks", n), func(t *testing.T) {
			ctx := testCtx(t)
			comms := newFixture(t, n).initAll(ctx)
			for _, tc := range wrongCalls() {
				errs := each(comms, func(c *runtime.Comm) error { return tc.call(ctx, c) })
				for r, err := range errs {
					if !isCode(err, codes.WrongCollective) {
						t.Fatalf("%s: rank %d = %v, want H1618", tc.name, r, err)
					}
				}
				errs = each(comms, func(c *runtime.Comm) error {
					f := &matrixFail{}
					checkGoesOn(ctx, c, f, tc.name)
					return f.err()
				})
				for r, err := range errs {
					if err != nil {
						t.Fatalf("rank %d: %v", r, err)
					}
				}
			}
			// Over-limit data off the root of bcast and scatter is not
			// looked at: the call works.
			errs := each(comms, func(c *runtime.Comm) error {
				big := make([]byte, runtime.MaxCollective+1)
				d := []byte("ok")
				if c.Rank() != 0 {
					d = big
				}
				got, err := c.Bcast(ctx, 0, d)
				if err != nil || string(got) != "ok" {
					return fmt.Errorf("bcast with over-limit data off the root = %q, %v", got, err)
				}
				d = make([]byte, c.Size())
				if c.Rank() != 0 {
					d = big
				}
				if got, err := c.Scatter(ctx, 0, d); err != nil || len(got) != 1 {
					return fmt.Errorf("scatter with over-limit data off the root = %x, %v", got, err)
				}
				return c.Finish()
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

// TestLimitData: exactly MaxCollective bytes work for every call.
func TestLimitData(t *testing.T) {
	const n = 3
	if runtime.MaxCollective%n != 0 || runtime.MaxCollective%8 != 0 {
		t.Fatalf("MaxCollective %d is no whole number of int64 or of %d blocks", runtime.MaxCollective, n)
	}
	ctx := testCtx(t)
	comms := newFixture(t, n).initAll(ctx)
	const elems = runtime.MaxCollective / 8
	contrib := make([][]byte, n)
	for r := range contrib {
		contrib[r] = make([]byte, runtime.MaxCollective)
		for i := 0; i < elems; i++ {
			binary.LittleEndian.PutUint64(contrib[r][8*i:], uint64(i)*0x9e3779b97f4a7c15+uint64(r)<<60)
		}
	}
	// The reference, element by element: int64 sum, wrapping.
	want := make([]byte, runtime.MaxCollective)
	for i := 0; i < elems; i++ {
		var s uint64
		for r := range contrib {
			s += binary.LittleEndian.Uint64(contrib[r][8*i:])
		}
		binary.LittleEndian.PutUint64(want[8*i:], s)
	}
	start := time.Now()
	errs := each(comms, func(c *runtime.Comm) error {
		r := c.Rank()
		mine := contrib[r]
		got, err := c.Bcast(ctx, 1, mine)
		if err != nil || !bytes.Equal(got, contrib[1]) {
			return fmt.Errorf("bcast of %d bytes: %d bytes, %v", len(mine), len(got), err)
		}
		got, err = c.Reduce(ctx, 2, runtime.Int64, runtime.Sum, mine)
		if err != nil || (r == 2) != (len(got) > 0) || r == 2 && !bytes.Equal(got, want) {
			return fmt.Errorf("reduce of %d bytes: %d bytes, %v", len(mine), len(got), err)
		}
		got, err = c.Allreduce(ctx, runtime.Int64, runtime.Sum, mine)
		if err != nil || !bytes.Equal(got, want) {
			return fmt.Errorf("allreduce of %d bytes: %d bytes, %v", len(mine), len(got), err)
		}
		got, err = c.Gather(ctx, 0, mine)
		if err != nil || (r == 0) != (len(got) > 0) || r == 0 && !bytes.Equal(got, bytes.Join(contrib, nil)) {
			return fmt.Errorf("gather of %d bytes: %d bytes, %v", len(mine), len(got), err)
		}
		got, err = c.Scatter(ctx, 1, mine)
		b := runtime.MaxCollective / n
		if err != nil || !bytes.Equal(got, contrib[1][r*b:(r+1)*b]) {
			return fmt.Errorf("scatter of %d bytes: %d bytes, %v", len(mine), len(got), err)
		}
		return c.Finish()
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	t.Logf("5 calls of %d bytes on %d ranks: %v", runtime.MaxCollective, n, time.Since(start))
}

// TestMismatchMatrix extends TestMismatchEndsJob: more calls, roots, types
// and ops that do not match, on 3 and 5 ranks. The rank that sees it
// returns H1613, every other H1612 whose cause is a failed rank's H1613,
// and the job ends at once (well within the silence limit).
func TestMismatchMatrix(t *testing.T) {
	type mcase struct {
		name string
		n    int
		call func(ctx context.Context, c *runtime.Comm) error
	}
	red := func(ctx context.Context, c *runtime.Comm, allr bool, root int, typ runtime.Type, op runtime.Op, d []byte) error {
		var err error
		if allr {
			_, err = c.Allreduce(ctx, typ, op, d)
		} else {
			_, err = c.Reduce(ctx, root, typ, op, d)
		}
		return err
	}
	kindCall := func(ctx context.Context, c *runtime.Comm, kind string) error {
		var err error
		switch kind {
		case "barrier":
			err = c.Barrier(ctx)
		case "bcast":
			_, err = c.Bcast(ctx, 0, []byte("x"))
		case "reduce":
			_, err = c.Reduce(ctx, 0, runtime.Int64, runtime.Sum, i64s(1))
		case "allreduce":
			_, err = c.Allreduce(ctx, runtime.Int64, runtime.Sum, i64s(1))
		case "gather":
			_, err = c.Gather(ctx, 0, i64s(1))
		case "scatter":
			_, err = c.Scatter(ctx, 0, make([]byte, 8*c.Size()))
		}
		return err
	}
	cases := []mcase{
		{"allreduce contributions of 8 and 16 bytes", 3, func(ctx context.Context, c *runtime.Comm) error {
			d := i64s(1)
			if c.Rank() == 1 {
				d = i64s(1, 2)
			}
			return red(ctx, c, true, 0, runtime.Int64, runtime.Sum, d)
		}},
		{"reduce to rank 2 whose own contribution is longer", 3, func(ctx context.Context, c *runtime.Comm) error {
			d := i64s(1)
			if c.Rank() == 2 {
				d = i64s(1, 2)
			}
			return red(ctx, c, false, 2, runtime.Float64, runtime.Max, d)
		}},
		{"reduce of empty data on one rank", 5, func(ctx context.Context, c *runtime.Comm) error {
			d := []byte{1, 2, 3, 4}
			if c.Rank() == 3 {
				d = nil
			}
			return red(ctx, c, false, 4, runtime.Bytes, runtime.Bxor, d)
		}},
		{"gather contributions of different lengths", 3, func(ctx context.Context, c *runtime.Comm) error {
			_, err := c.Gather(ctx, 1, make([]byte, 1+c.Rank()))
			return err
		}},
		{"gather contributions of different lengths on 5 ranks", 5, func(ctx context.Context, c *runtime.Comm) error {
			d := []byte("abc")
			if c.Rank() == 4 {
				d = []byte("ab")
			}
			_, err := c.Gather(ctx, 0, d)
			return err
		}},
		{"scatter from rank 1 of no whole number of blocks", 3, func(ctx context.Context, c *runtime.Comm) error {
			_, err := c.Scatter(ctx, 1, make([]byte, 8))
			return err
		}},
		{"scatter of no whole number of blocks on 5 ranks", 5, func(ctx context.Context, c *runtime.Comm) error {
			_, err := c.Scatter(ctx, 4, make([]byte, 12))
			return err
		}},
		{"different roots of reduce", 3, func(ctx context.Context, c *runtime.Comm) error {
			return red(ctx, c, false, c.Rank()/2, runtime.Int64, runtime.Sum, i64s(1))
		}},
		{"different roots of gather", 3, func(ctx context.Context, c *runtime.Comm) error {
			root := 1
			if c.Rank() == 0 {
				root = 2
			}
			_, err := c.Gather(ctx, root, []byte("x"))
			return err
		}},
		{"different roots of scatter", 5, func(ctx context.Context, c *runtime.Comm) error {
			root := 0
			if c.Rank() == 3 {
				root = 4
			}
			_, err := c.Scatter(ctx, root, make([]byte, 5))
			return err
		}},
		{"different types of the same size: int32 and uint32", 3, func(ctx context.Context, c *runtime.Comm) error {
			typ := runtime.Int32
			if c.Rank() == 2 {
				typ = runtime.Uint32
			}
			return red(ctx, c, false, 0, typ, runtime.Max, make([]byte, 8))
		}},
		{"different types: float64 and int64", 3, func(ctx context.Context, c *runtime.Comm) error {
			typ := runtime.Float64
			if c.Rank() == 0 {
				typ = runtime.Int64
			}
			return red(ctx, c, true, 0, typ, runtime.Sum, make([]byte, 8))
		}},
		{"different ops of reduce: sum and prod", 3, func(ctx context.Context, c *runtime.Comm) error {
			op := runtime.Sum
			if c.Rank() == 1 {
				op = runtime.Prod
			}
			return red(ctx, c, false, 1, runtime.Uint64, op, make([]byte, 8))
		}},
		{"different ops on bytes: band and bor", 5, func(ctx context.Context, c *runtime.Comm) error {
			op := runtime.Band
			if c.Rank() == 4 {
				op = runtime.Bor
			}
			return red(ctx, c, true, 0, runtime.Bytes, op, []byte{1})
		}},
	}
	kinds := []string{"barrier", "bcast", "reduce", "allreduce", "gather", "scatter"}
	for i, a := range kinds {
		b := kinds[(i+1)%len(kinds)]
		cases = append(cases, mcase{fmt.Sprintf("%s against %s", a, b), 3, func(ctx context.Context, c *runtime.Comm) error {
			if c.Rank() == 2 {
				return kindCall(ctx, c, b)
			}
			return kindCall(ctx, c, a)
		}})
	}
	cases = append(cases, mcase{"reduce against allreduce, equal in all else", 3, func(ctx context.Context, c *runtime.Comm) error {
		return red(ctx, c, c.Rank() == 0, 0, runtime.Int64, runtime.Sum, i64s(1))
	}}, mcase{"barrier against a wrong reduce (a void of another call)", 3, func(ctx context.Context, c *runtime.Comm) error {
		if c.Rank() == 2 {
			err := red(ctx, c, false, 7, runtime.Int64, runtime.Sum, i64s(1))
			if !isCode(err, codes.WrongCollective) {
				return fmt.Errorf("the wrong reduce = %v, want H1618", err)
			}
			return c.Barrier(ctx) // the job has ended by now, or ends here
		}
		return c.Barrier(ctx)
	}})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			comms := newFixture(t, tc.n).initAll(ctx)
			// A call that works first, so the mismatch is not call 1.
			for r, err := range each(comms, func(c *runtime.Comm) error { return c.Barrier(ctx) }) {
				if err != nil {
					t.Fatalf("rank %d: first barrier = %v", r, err)
				}
			}
			// Every rank's outcome is the mismatch itself (H1613, or H1612
			// whose cause is it): a job that ended by silence would show
			// H1611 instead. No clock is read: the machine may be loaded.
			errs := each(comms, func(c *runtime.Comm) error { return tc.call(ctx, c) })
			seen := 0
			for r, err := range errs {
				switch {
				case isCode(err, codes.CollectiveMismatch):
					seen++
				case isCode(err, codes.JobEnded):
					if e := codes.As(err); e.Cause == nil || e.Cause.Kind != codes.CauseFailed || e.Cause.Code != codes.CollectiveMismatch {
						t.Errorf("rank %d: %v has cause %+v, want a failed rank's H1613", r, err, e.Cause)
					}
				default:
					t.Errorf("rank %d: %v, want H1613 or H1612", r, err)
				}
			}
			if seen == 0 {
				t.Errorf("no rank saw H1613: %v", errs)
			}
			for r, err := range each(comms, func(c *runtime.Comm) error { return c.Barrier(ctx) }) {
				if !isCode(err, codes.CollectiveMismatch) && !isCode(err, codes.JobEnded) {
					t.Errorf("rank %d: barrier after the mismatch = %v, want the job's end", r, err)
				}
			}
		})
	}
}
