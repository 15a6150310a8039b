//go:build cgo

package cudashim

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/internal/indexconf"
	"github.com/vrun-go/vrun/rt"
)

// Tests of the ops of indexed.ptx (GatherElements, ScatterElements, TopK).
// TestIndexedDiff runs them on the GPU against the CPU backend; the others
// need no GPU.

// xenv allocates the operands of one op on one device.
type xenv struct {
	t    *testing.T
	dev  rt.Device
	rng  *rand.Rand
	outs []xout
}

// xout is an output (or in-place) operand with sentinel bytes around it.
type xout struct {
	buf rt.Buffer
	off int64
	n   int
	dt  rt.DType
}

const xsentinel = 0xA5

// out makes a contiguous operand of shape, with contents init (nil:
// sentinel bytes) and guard bytes on both sides.
func (e *xenv) out(dt rt.DType, init []float64, shape ...int) rt.Ref {
	n := int(rt.NumElements(shape))
	sz := n * dt.Size()
	raw := make([]byte, sz+2*guard)
	for i := range raw {
		raw[i] = xsentinel
	}
	if init != nil {
		copy(raw[guard:], backendtest.Values(dt, init).Data)
	}
	b := backendtest.Upload(e.t, e.dev, raw)
	e.outs = append(e.outs, xout{b, guard, n, dt})
	return rt.Ref{Buf: b, Off: guard, DType: dt, Shape: shape}
}

func (e *xenv) values(dt rt.DType, specials bool) func() float64 {
	lo, hi := backendtest.ValueRange(dt)
	k := 0
	return func() float64 {
		k++
		if specials && dt.IsFloat() {
			switch k % 11 {
			case 3:
				return math.NaN()
			case 5:
				return math.Inf(1)
			case 7:
				return math.Inf(-1)
			case 9:
				return math.Copysign(0, -1)
			}
		}
		v := lo + e.rng.Float64()*(hi-lo)
		if !dt.IsFloat() {
			v = math.Floor(v)
		}
		return v
	}
}

func (e *xenv) indices(it rt.DType, axis int) func() float64 {
	return func() float64 {
		if it == rt.I64 && e.rng.Intn(10) == 0 {
			return []float64{1 << 40, -(1 << 40), -9.223372036854775808e18, math.MaxInt32 + 1, math.MinInt32}[e.rng.Intn(5)]
		}
		return float64(e.rng.Intn(2*axis+4) - axis - 2)
	}
}

type xcase struct {
	name  string
	build func(e *xenv) rt.Op
}

var xdtypes = []rt.DType{rt.F32, rt.F16, rt.F64, rt.I32, rt.I64, rt.U8, rt.I8, rt.Bool}

func indexedCases() []xcase {
	var cs []xcase
	for _, dt := range xdtypes {
		for _, it := range []rt.DType{rt.I32, rt.I64} {
			for si, s := range [][4]int{{3, 5, 7, 4}, {1, 9, 1, 1}, {2, 1, 3, 5}, {2, 7, 11, 3}} {
				for li, lay := range backendtest.Layouts {
					O, A, N, I := s[0], s[1], s[2], s[3]
					cs = append(cs, xcase{fmt.Sprintf("gather_elements_%s_%s_%d_%d", dt, it, si, li), func(e *xenv) rt.Op {
						x := backendtest.Strided(e.t, e.dev, dt, []int{O, A, I}, nil, e.values(dt, false))
						idx := backendtest.Strided(e.t, e.dev, it, []int{O, N, I}, lay.Strides(O, N, I), e.indices(it, A))
						y := e.out(dt, nil, O, N, I)
						// AllowOutOfRange: the zeros of out-of-range indices (the
						// error is TestIndexOutOfRange's).
						return &rt.GatherElements{X: x, Idx: idx, Y: y, Outer: O, Axis: A, N: N, Inner: I, AllowOutOfRange: true}
					}})
				}
			}
		}
		for fn := rt.ScatterSet; fn <= rt.ScatterMin; fn++ {
			for si, s := range [][4]int{{2, 5, 13, 3}, {1, 4, 9, 1}, {3, 1, 4, 2}, {1, 3, 40, 7}} {
				for li, lay := range backendtest.Layouts {
					O, A, N, I := s[0], s[1], s[2], s[3]
					it := []rt.DType{rt.I32, rt.I64}[(si+li)%2]
					ulay := backendtest.Layouts[(li+1+si)%len(backendtest.Layouts)]
					cs = append(cs, xcase{fmt.Sprintf("scatter_elements_%s_%s_%s_%d_%d", fn, dt, it, si, li), func(e *xenv) rt.Op {
						gen := e.values(dt, false)
						if dt.IsFloat() && fn == rt.ScatterMul {
							gen = func() float64 { return (e.rng.Float64()*2 - 1) * 2.5 }
						}
						init := make([]float64, O*A*I)
						for k := range init {
							init[k] = gen()
						}
						if dt.IsFloat() && len(init) > 2 {
							init[1], init[2] = math.NaN(), math.Copysign(0, -1)
						}
						y := e.out(dt, init, O, A, I)
						idx := backendtest.Strided(e.t, e.dev, it, []int{O, N, I}, lay.Strides(O, N, I), e.indices(it, A))
						upd := backendtest.Strided(e.t, e.dev, dt, []int{O, N, I}, ulay.Strides(O, N, I), e.values(dt, true))
						if dt.IsFloat() && fn == rt.ScatterMul {
							upd = backendtest.Strided(e.t, e.dev, dt, []int{O, N, I}, ulay.Strides(O, N, I), gen)
						}
						return &rt.ScatterElements{Fn: fn, Y: y, Idx: idx, Upd: upd, Outer: O, Axis: A, N: N, Inner: I,
							AllowOutOfRange: true} // skips; TestIndexOutOfRange checks the error
					}})
				}
			}
		}
		for si, s := range [][3]int{{3, 17, 4}, {1, 1, 1}, {2, 33, 1}, {1, 300, 2}, {2, 2000, 1}} {
			O, N, I := s[0], s[1], s[2]
			for _, K := range []int{1, (N + 1) / 2, N} {
				for _, largest := range []bool{true, false} {
					cs = append(cs, xcase{fmt.Sprintf("topk_%s_%d_k%d_largest%v", dt, si, K, largest), func(e *xenv) rt.Op {
						lo, hi := backendtest.ValueRange(dt)
						if dt != rt.U8 && dt != rt.Bool {
							lo, hi = -6, 6 // many ties
						}
						x := backendtest.Strided(e.t, e.dev, dt, []int{O, N, I}, nil, func() float64 {
							v := math.Floor(lo + e.rng.Float64()*(hi-lo))
							if dt.IsFloat() {
								switch e.rng.Intn(9) {
								case 0:
									v = math.NaN()
								case 1:
									v = math.Copysign(0, -1)
								case 2:
									v += 0.5
								case 3:
									v = math.Inf(2*e.rng.Intn(2) - 1)
								}
							}
							return v
						})
						vals := e.out(dt, nil, O, K, I)
						ind := e.out(rt.I64, nil, O, K, I)
						return &rt.TopK{X: x, Values: vals, Indices: ind, Outer: O, N: N, Inner: I, K: K, Largest: largest}
					}})
				}
			}
		}
	}
	return cs
}

// runIndexedDiff runs every case on ref and dev with identical inputs and
// compares the outputs (floats by value, NaN equal to NaN).
func runIndexedDiff(t *testing.T, ref, dev rt.Device) {
	for ci, c := range indexedCases() {
		t.Run(c.name, func(t *testing.T) {
			var res [2][][]byte
			var outs []xout
			for k, d := range []rt.Device{ref, dev} {
				e := &xenv{t: t, dev: d, rng: rand.New(rand.NewSource(int64(ci)))}
				op := c.build(e)
				if err := d.Supports(op); err != nil {
					t.Fatalf("%s: %v", d.Info().Backend, err)
				}
				backendtest.Run(t, d, op)
				for _, o := range e.outs {
					raw := make([]byte, o.buf.Size())
					if err := d.Read(raw, o.buf, 0); err != nil {
						t.Fatal(err)
					}
					pay := int64(o.n * o.dt.Size())
					for i, b := range raw {
						if (int64(i) < o.off || int64(i) >= o.off+pay) && b != xsentinel {
							t.Fatalf("%s: sentinel byte %d overwritten", d.Info().Backend, i)
						}
					}
					res[k] = append(res[k], raw[o.off:o.off+pay])
				}
				outs = e.outs
			}
			for i, o := range outs {
				a := &rt.Tensor{DType: o.dt, Shape: []int{o.n}, Data: res[0][i]}
				b := &rt.Tensor{DType: o.dt, Shape: []int{o.n}, Data: res[1][i]}
				for j := 0; j < o.n; j++ {
					w, g := a.Float64(j), b.Float64(j)
					if w != g && !(math.IsNaN(w) && math.IsNaN(g)) {
						t.Fatalf("output %d element %d: %s %v, %s %v", i, j, dev.Info().Backend, g, ref.Info().Backend, w)
					}
				}
			}
		})
	}
}

// TestIndexedDiff compares the CUDA kernels of indexed.ptx with the CPU
// backend.
func TestIndexedDiff(t *testing.T) {
	d := openTest(t, true)
	if d.noIndexed != "" {
		t.Skipf("GatherElements, ScatterElements and TopK unsupported: %s", d.noIndexed)
	}
	ref := cpu.NewDevice()
	defer ref.Close()
	runIndexedDiff(t, ref, d)
}

// TestIndexedCasesOnCPU runs the cases of TestIndexedDiff with the CPU
// backend on both sides (no GPU needed), so the cases are known to be
// valid ops.
func TestIndexedCasesOnCPU(t *testing.T) {
	a, b := cpu.NewDevice(), cpu.NewDevice()
	defer a.Close()
	defer b.Close()
	runIndexedDiff(t, a, b)
}

// TestIndexedPlaceholder checks that while indexed.ptx is the placeholder a
// device reports the three ops as unsupported with the reason, and (on a
// GPU) still opens and runs the other ops.
func TestIndexedPlaceholder(t *testing.T) {
	if !IndexedPTXIsPlaceholder() && os.Getenv(indexedPTXOverride) == "" {
		// With the real indexed.ptx a device must load it.
		if gpuSkip == "" {
			if d := openTest(t, true); d.noIndexed != "" {
				t.Fatalf("indexed.ptx is built but the device reports %q", d.noIndexed)
			}
		}
		t.Skip("indexed.ptx is built")
	}
	if os.Getenv(indexedPTXOverride) != "" {
		t.Skip(indexedPTXOverride + " is set")
	}
	check := func(d *Device) {
		t.Helper()
		buf := &Buffer{dev: d, size: 1 << 10, ptr: 1 << 32}
		f := rt.Ref{Buf: buf, DType: rt.F32, Shape: []int{1, 4, 1}}
		i64 := rt.Ref{Buf: buf, DType: rt.I64, Shape: []int{1, 4, 1}}
		for _, op := range []rt.Op{
			&rt.GatherElements{X: f, Idx: i64, Y: f, Outer: 1, Axis: 4, N: 4, Inner: 1},
			&rt.ScatterElements{Y: f, Idx: i64, Upd: f, Outer: 1, Axis: 4, N: 4, Inner: 1},
			&rt.TopK{X: f, Values: f, Indices: i64, Outer: 1, N: 4, Inner: 1, K: 2},
		} {
			err := d.Supports(op)
			var ue *rt.UnsupportedError
			if !errors.As(err, &ue) || ue.Reason != indexedNotBuilt {
				t.Errorf("%s: Supports = %v, want *rt.UnsupportedError with reason %q", op.OpName(), err, indexedNotBuilt)
			}
		}
		if err := d.Supports(&rt.Unary{Fn: rt.Relu, X: f, Y: f}); err != nil {
			t.Errorf("Unary: %v", err)
		}
	}
	check(&Device{noIndexed: indexedNotBuilt})
	if gpuSkip == "" {
		d := openTest(t, true)
		if d.noIndexed != indexedNotBuilt {
			t.Fatalf("device noIndexed = %q, want %q", d.noIndexed, indexedNotBuilt)
		}
		check(d)
		// Everything else runs.
		x, xr := devTensor(t, d, backendtest.Values(rt.F32, []float64{-1, 2, -3, 4}))
		defer x.Free()
		backendtest.Run(t, d, &rt.Unary{Fn: rt.Relu, X: xr, Y: xr})
		got := bytesToF32(readBack(t, d, xr, 16))
		if fmt.Sprint(got) != "[0 2 0 4]" {
			t.Fatalf("Relu on the placeholder device: %v", got)
		}
	}
}

func bytesToF32(b []byte) []float32 {
	tt := &rt.Tensor{DType: rt.F32, Shape: []int{len(b) / 4}, Data: b}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = float32(tt.Float64(i))
	}
	return v
}

// TestIndexedArgsLayout checks, without a GPU, that the argument words the
// lowering packs for each op land in the fields of the matching struct of
// kernels/indexed.cu, by name and in order.
func TestIndexedArgsLayout(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(kernelsDir(), "indexed.cu"))
	if err != nil {
		t.Fatal(err)
	}
	structs := map[string][]string{}
	for _, m := range regexp.MustCompile(`(?s)struct (\w+Args) \{(.*?)\};`).FindAllStringSubmatch(string(src), -1) {
		var fields []string
		for _, decl := range strings.Split(m[2], ";") {
			decl = strings.TrimSpace(decl)
			if decl == "" {
				continue
			}
			typ, names, ok := strings.Cut(decl, " ")
			if !ok || (typ != "u64" && typ != "i64") {
				t.Fatalf("indexed.cu: struct %s: field %q is not u64 or i64", m[1], decl)
			}
			for _, n := range strings.Split(names, ",") {
				fields = append(fields, strings.TrimSpace(n))
			}
		}
		structs[m[1]] = fields
	}
	d := &Device{}
	const base = 1 << 32
	buf := &Buffer{dev: d, size: 1 << 20, ptr: base}
	r := func(dt rt.DType, off int64, shape []int, st ...int) rt.Ref {
		ref := rt.Ref{Buf: buf, Off: off, DType: dt, Shape: shape}
		if st != nil {
			ref.Strides = st
		}
		return ref
	}
	for _, c := range []struct {
		op     rt.Op
		kernel int
		strct  string
		want   map[string]int64
	}{
		{&rt.GatherElements{X: r(rt.F16, 64, []int{2, 3, 5}), Idx: r(rt.I32, 4096, []int{2, 7, 5}, 11, -13, 0), Y: r(rt.F16, 256, []int{2, 7, 5}),
			Outer: 2, Axis: 3, N: 7, Inner: 5}, kGatherElements, "GatherElArgs",
			map[string]int64{"x": base + 64, "idx": base + 4096, "y": base + 256, "outer": 2, "axis": 3, "n": 7, "inner": 5,
				"is0": 11, "is1": -13, "is2": 0, "esz": 2, "idx64": 0, "status": 0, "tag": 0}},
		{&rt.ScatterElements{Fn: rt.ScatterMax, Y: r(rt.I8, 64, []int{2, 3, 5}), Idx: r(rt.I64, 128, []int{2, 7, 5}, 0, 1, 0), Upd: r(rt.I8, 512, []int{2, 7, 5}, 35, 5, -1),
			Outer: 2, Axis: 3, N: 7, Inner: 5}, kScatterElements, "ScatterElArgs",
			map[string]int64{"y": base + 64, "idx": base + 128, "upd": base + 512, "outer": 2, "axis": 3, "n": 7, "inner": 5,
				"is0": 0, "is1": 1, "is2": 0, "us0": 35, "us1": 5, "us2": -1, "dt": int64(rt.I8), "esz": 1, "idx64": 1, "fn": int64(rt.ScatterMax),
				"status": 0, "tag": 0}},
		{&rt.TopK{X: r(rt.F64, 64, []int{2, 7, 5}), Values: r(rt.F64, 1024, []int{2, 3, 5}), Indices: r(rt.I64, 2048, []int{2, 3, 5}),
			Outer: 2, N: 7, Inner: 5, K: 3, Largest: true}, kTopK, "TopKArgs",
			map[string]int64{"x": base + 64, "vals": base + 1024, "ind": base + 2048, "outer": 2, "n": 7, "inner": 5, "k": 3,
				"dt": int64(rt.F64), "largest": 1}},
	} {
		fields, ok := structs[c.strct]
		if !ok {
			t.Fatalf("indexed.cu has no struct %s", c.strct)
		}
		if err := rt.CheckOp(c.op); err != nil {
			t.Fatalf("%s: %v", c.op.OpName(), err)
		}
		ls, _, err := d.lower(c.op)
		if err != nil || len(ls) != 1 {
			t.Fatalf("%s: lower: %d launches, %v", c.op.OpName(), len(ls), err)
		}
		l := ls[0]
		if l.kernel != c.kernel {
			t.Errorf("%s: kernel %s, want %s", c.op.OpName(), kernelNames[l.kernel], kernelNames[c.kernel])
		}
		if len(l.args) != 8*len(fields) {
			t.Fatalf("%s: %d argument bytes, struct %s has %d fields", c.op.OpName(), len(l.args), c.strct, len(fields))
		}
		if len(c.want) != len(fields) {
			t.Fatalf("%s: test expects %d fields, struct %s has %v", c.op.OpName(), len(c.want), c.strct, fields)
		}
		tt := &rt.Tensor{DType: rt.I64, Shape: []int{len(fields)}, Data: l.args}
		for i, f := range fields {
			want, ok := c.want[f]
			if !ok {
				t.Errorf("%s: struct field %s not expected", c.strct, f)
				continue
			}
			if got := int64(tt.Float64(i)); got != want {
				t.Errorf("%s: field %d (%s) = %d, want %d", c.strct, i, f, got, want)
			}
		}
	}
	if kernelNames[kGatherElements] != "gather_elements" || kernelNames[kTopK] != "topk" {
		t.Errorf("kernel names %v", kernelNames[numKernels:])
	}
}

// TestIndexOutOfRange checks that out-of-range indices of Gather,
// GatherElements and ScatterElements fail the run through the stream's
// status words (internal/indexconf). PTX built before the status fields
// (kernels/build.sh not run since) cannot flag: the test fails then, so
// that a stale PTX is noticed on the GPU.
func TestIndexOutOfRange(t *testing.T) {
	d := openTest(t, true)
	if !d.indexStatus {
		t.Fatal("the embedded PTX predates the index status fields: rebuild it with cudashim/kernels/build.sh")
	}
	indexconf.Run(t, d)
}

// TestPTXIndexStatus checks, without a GPU, the detection of index-status
// PTX: the argument struct sizes that ptxHasIndexStatus expects match the
// structs of the sources, and the embedded PTX has them unless a module
// is a placeholder.
func TestPTXIndexStatus(t *testing.T) {
	words := func(file, strct string) int {
		src, err := os.ReadFile(filepath.Join(kernelsDir(), file))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?s)struct ` + strct + ` \{(.*?)\};`).FindStringSubmatch(string(src))
		if m == nil {
			t.Fatalf("%s has no struct %s", file, strct)
		}
		n := 0
		for _, line := range strings.Split(m[1], "\n") {
			line, _, _ = strings.Cut(line, "//")
			for _, decl := range strings.Split(line, ";") {
				if _, names, ok := strings.Cut(strings.TrimSpace(decl), " "); ok {
					n += len(strings.Split(names, ","))
				}
			}
		}
		return 8 * n
	}
	for _, c := range []struct {
		file, strct string
		want        int
	}{{"nn.cu", "GatherArgs", gatherArgBytes}, {"indexed.cu", "GatherElArgs", gatherElArgBytes}, {"indexed.cu", "ScatterElArgs", scatterElArgBytes}} {
		if got := words(c.file, c.strct); got != c.want {
			t.Errorf("%s: struct %s is %d bytes, ptxHasIndexStatus expects %d", c.file, c.strct, got, c.want)
		}
	}
	if ptxHasIndexStatus("", "") {
		t.Error("empty PTX has the index status")
	}
	if !PTXIsPlaceholder() && !IndexedPTXIsPlaceholder() && !ptxHasIndexStatus(embeddedPTX, embeddedIndexedPTX) {
		t.Errorf("the embedded PTX lacks the index status fields (param sizes %v, %v): rebuild it with cudashim/kernels/build.sh",
			ptxParamBytes(embeddedPTX)["gather"], ptxParamBytes(embeddedIndexedPTX))
	}
}
