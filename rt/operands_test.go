package rt

import (
	"math"
	"math/rand"
	"reflect"
	"testing"
)

// allOps is one zero value of every op type.
var allOps = []Op{&Unary{}, &Binary{}, &Where{}, &Reduce{}, &Softmax{}, &MatMul{}, &Conv{}, &ConvTranspose{},
	&Pool{}, &Normalize{}, &Gather{}, &Fill{}, &GatherElements{}, &ScatterElements{}, &TopK{}, &OptimStep{}}

// TestOperandsCoverFields checks the operand table against the op structs
// themselves: every Ref field, in field order, pointing at the field, and
// optional exactly for Bias, Scale, Conv's Res and OptimStep's states.
func TestOperandsCoverFields(t *testing.T) {
	for _, op := range allOps {
		v := reflect.ValueOf(op).Elem()
		var want []string
		for i := 0; i < v.NumField(); i++ {
			if v.Field(i).Type() == reflect.TypeOf(Ref{}) {
				want = append(want, v.Type().Field(i).Name)
			}
		}
		ops := Operands(op)
		if len(ops) != len(want) {
			t.Errorf("%s: %d operands, want %d (%v)", op.OpName(), len(ops), len(want), want)
			continue
		}
		outputs := 0
		for i, o := range ops {
			if o.Name != want[i] {
				t.Errorf("%s: operand %d is %s, want %s", op.OpName(), i, o.Name, want[i])
			}
			if o.Ref != v.FieldByName(want[i]).Addr().Interface().(*Ref) {
				t.Errorf("%s: operand %s does not point at its field", op.OpName(), o.Name)
			}
			_, optim := op.(*OptimStep)
			state := optim && (want[i] == "S1" || want[i] == "S2" || want[i] == "S3")
			if opt := want[i] == "Bias" || want[i] == "Scale" || want[i] == "Res" || state; o.Optional != opt {
				t.Errorf("%s: operand %s optional = %v, want %v", op.OpName(), o.Name, o.Optional, opt)
			}
			if o.Output {
				outputs++
			}
		}
		if outputs == 0 {
			t.Errorf("%s: no output operand", op.OpName())
		}
	}
	if Operands(nil) != nil || Operands((*Conv)(nil)) != nil {
		t.Error("Operands of a nil op is not nil")
	}
}

func TestOperandExtents(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   Op
		want map[string]int64
	}{
		{"reduce", &Reduce{Outer: 2, N: 3, Inner: 5}, map[string]int64{"X": 30, "Y": 10}},
		{"matmul", &MatMul{Batch: 3, M: 2, N: 4, K: 5, StrideA: 10, StrideB: 0, StrideY: 8},
			map[string]int64{"A": 2*10 + 10, "B": 20, "Y": 2*8 + 8}},
		{"matmul batch 0", &MatMul{Batch: 0, M: 2, N: 4, K: 5}, map[string]int64{"A": -1, "B": -1, "Y": -1}},
		{"conv", &Conv{N: 2, C: 6, H: 5, Width: 7, K: 4, OH: 3, OW: 3, KH: 3, KW: 2, Groups: 2},
			map[string]int64{"X": 2 * 6 * 5 * 7, "W": 4 * 3 * 3 * 2, "Bias": 4, "Y": 2 * 4 * 3 * 3}},
		{"conv no groups", &Conv{N: 1, C: 6, K: 4, KH: 3, KW: 3}, map[string]int64{"W": -1}},
		{"convT", &ConvTranspose{N: 1, C: 6, H: 2, Width: 2, K: 4, KH: 3, KW: 3, Groups: 2, OH: 4, OW: 4},
			map[string]int64{"X": 24, "W": 6 * 2 * 9, "Y": 64}},
		{"gather", &Gather{Outer: 2, Axis: 5, Inner: 3, Idx: Ref{Shape: []int{4}}}, map[string]int64{"X": 30, "Idx": 4, "Y": 24}},
		{"topk", &TopK{Outer: 2, N: 9, Inner: 3, K: 4}, map[string]int64{"X": 54, "Values": 24, "Indices": 24}},
		{"optim", &OptimStep{N: 37}, map[string]int64{"P": 37, "G": 37, "S1": 37, "S2": 37, "S3": 37, "H": OptimHyperLen, "Scale": 1}},
		{"overflow", &Softmax{Outer: math.MaxInt32, N: math.MaxInt32, Inner: math.MaxInt32}, map[string]int64{"X": -1, "Y": -1}},
		{"negative", &Pool{NC: -1, H: 2, W: 2, OH: 1, OW: 1}, map[string]int64{"X": -1, "Y": -1}},
	} {
		for _, o := range Operands(tc.op) {
			if want, ok := tc.want[o.Name]; ok && o.Need != want {
				t.Errorf("%s: %s needs %d, want %d", tc.name, o.Name, o.Need, want)
			}
		}
	}
}

// offsets lists, for every multi-index of shape in row-major order, the
// element offset of each operand: the naive walk Coalesce must preserve.
func offsets(shape []int, strides [][]int) [][]int {
	var out [][]int
	idx := make([]int, len(shape))
	for _, s := range shape {
		if s == 0 {
			return nil
		}
	}
	for {
		row := make([]int, len(strides))
		for k, st := range strides {
			for d := range shape {
				row[k] += idx[d] * st[d]
			}
		}
		out = append(out, row)
		d := len(shape) - 1
		for ; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
		if d < 0 {
			return out
		}
	}
}

func TestCoalesce(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for it := 0; it < 500; it++ {
		rank := rng.Intn(6)
		shape := make([]int, rank)
		for d := range shape {
			shape[d] = []int{1, 1, 2, 3, 4}[rng.Intn(5)]
		}
		if it%50 == 0 && rank > 0 {
			shape[rng.Intn(rank)] = 0
		}
		nops := 1 + rng.Intn(4)
		strides := make([][]int, nops)
		for k := range strides {
			switch rng.Intn(3) {
			case 0:
				strides[k] = ContiguousStrides(shape)
			case 1: // a transposed or broadcast view
				strides[k] = ContiguousStrides(shape)
				for d := range strides[k] {
					if rng.Intn(3) == 0 {
						strides[k][d] = 0
					}
				}
			default:
				strides[k] = make([]int, rank)
				for d := range strides[k] {
					strides[k][d] = rng.Intn(40) - 10
				}
			}
		}
		saved := make([][]int, nops)
		for k := range strides {
			saved[k] = append([]int{}, strides[k]...)
		}
		dims, st := Coalesce(shape, strides...)
		if !reflect.DeepEqual(saved, strides) {
			t.Fatalf("Coalesce modified its input strides")
		}
		for _, d := range dims {
			if d == 1 {
				t.Fatalf("%v: coalesced dims %v keep a unit dim", shape, dims)
			}
		}
		if len(dims) > len(shape) {
			t.Fatalf("%v: coalesced dims %v grew", shape, dims)
		}
		got, want := offsets(dims, st), offsets(shape, strides)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("shape %v strides %v: coalesced %v %v walks %v, want %v", shape, strides, dims, st, got, want)
		}
	}
	// A contiguous operand and a broadcast one merge to one dim per run.
	dims, st := Coalesce([]int{2, 3, 4}, []int{12, 4, 1}, []int{0, 0, 1})
	if !reflect.DeepEqual(dims, []int{6, 4}) || !reflect.DeepEqual(st, [][]int{{4, 1}, {0, 1}}) {
		t.Errorf("Coalesce = %v %v, want [6 4] [[4 1] [0 1]]", dims, st)
	}
}

func TestFillBits(t *testing.T) {
	for _, tc := range []struct {
		dt   DType
		v    float64
		want uint64
	}{
		{F32, 1.5, 0x3FC00000},
		{F32, -2, 0xC0000000},
		{F16, 1.5, 0x3E00},
		{F16, 65520, 0x7C00}, // rounds to +Inf
		{F64, 1.5, 0x3FF8000000000000},
		{I32, -1.9, 0xFFFFFFFF},
		{I32, 3e9, 0xB2D05E00}, // 3e9 wraps to its low 32 bits
		{I64, -1, 0xFFFFFFFFFFFFFFFF},
		{I64, math.NaN(), 0},
		{I64, 1e300, 0x7FFFFFFFFFFFFFFF},
		{I64, -1e300, 0x8000000000000000},
		{U8, 257.9, 1},
		{I8, -1, 0xFF},
		{Bool, 0.25, 1},
		{Bool, 0, 0},
		{InvalidDType, 1, 0},
	} {
		if got := FillBits(tc.dt, tc.v); got != tc.want {
			t.Errorf("FillBits(%s, %v) = %#x, want %#x", tc.dt, tc.v, got, tc.want)
		}
	}
	for _, tc := range []struct {
		v    float64
		want int64
	}{{2.9, 2}, {-2.9, -2}, {math.NaN(), 0}, {math.Inf(1), math.MaxInt64}, {math.Inf(-1), math.MinInt64}, {9.3e18, math.MaxInt64}, {-9.3e18, math.MinInt64}, {-0.5, 0}} {
		if got := FloatToInt(tc.v); got != tc.want {
			t.Errorf("FloatToInt(%v) = %d, want %d", tc.v, got, tc.want)
		}
	}
}
