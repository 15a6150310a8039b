//go:build cgo

package vulkan

import (
	"math"
	"math/rand"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// TestLevelOrder checks levelOrder on random dispatches over three
// buffers, across its windows: the result is a permutation of the input
// that keeps every conflicting pair (read after write, write after read,
// write after write) in launch order.
func TestLevelOrder(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	bufs := []*buffer{{}, {}, {}}
	spans := func() []span {
		var out []span
		for range r.Intn(3) {
			lo := int64(r.Intn(4000))
			out = append(out, span{bufs[r.Intn(len(bufs))], lo, lo + 1 + int64(r.Intn(300))})
		}
		return out
	}
	for _, n := range []int{1, 7, 60, levelWindow + 190} {
		xs := make([]*dispatch, n)
		pos := map[*dispatch]int{}
		for i := range xs {
			xs[i] = &dispatch{reads: spans(), writes: spans()}
		}
		out := levelOrder(append([]*dispatch(nil), xs...))
		if len(out) != n {
			t.Fatalf("n %d: %d dispatches out", n, len(out))
		}
		for i, x := range out {
			if _, dup := pos[x]; dup {
				t.Fatalf("n %d: dispatch twice in the order", n)
			}
			pos[x] = i
		}
		moved, kept := 0, 0
		for i := range xs {
			for j := range i {
				if conflict(xs[j], xs[i]) {
					kept++
					if pos[xs[j]] > pos[xs[i]] {
						t.Fatalf("n %d: dispatch %d now runs before %d, which it conflicts with", n, i, j)
					}
				} else if pos[xs[j]] > pos[xs[i]] {
					moved++
				}
			}
		}
		t.Logf("n %d: %d conflicting pairs kept in order, %d independent pairs swapped", n, kept, moved)
	}
}

// TestReorderFire runs a squeezenet fire module and the convolution after
// it in one stream, with split-K forced on all four convolutions: the
// squeeze, the two expands into halves of one output, and a 1×1 over
// that output. levelOrder puts the expands (in different scratch slots)
// between the same barriers, so the recording has fewer barriers than in
// launch order, and the result matches a float64 reference either way.
func TestReorderFire(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(11))
	defer func() { forceSplitK = 0 }()
	forceSplitK = 3
	f := newFire(t, d, r, 7)

	barriers := map[string]int{}
	for _, mode := range []string{"1", "0"} {
		t.Setenv("VRUN_VK_REORDER", mode)
		st, err := d.NewStream(rt.StreamOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range f.ops {
			if err := st.Launch(op); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Submit(); err != nil {
			t.Fatal(err)
		}
		if err := st.Wait(); err != nil {
			t.Fatal(err)
		}
		barriers[mode] = st.(*stream).barriers
		st.Close()
		f.check(t, d, "VRUN_VK_REORDER="+mode)
	}
	t.Logf("barriers: %d in level order, %d in launch order", barriers["1"], barriers["0"])
	if barriers["1"] >= barriers["0"] {
		t.Errorf("level order recorded %d barriers, launch order %d: want fewer", barriers["1"], barriers["0"])
	}
}

// fire is a squeezenet fire module and the 1×1 convolution after it on
// h×h planes: the squeeze (96→40, bias) into sb, the expands (40→12 1×1
// and 3×3) into the halves of yb, and 24→10 into zb, each with a ReLU;
// want and mag are Z's float64 reference and its magnitudes.
type fire struct {
	ops        []rt.Op
	sb, yb, zb *tbuf
	want, mag  []float64
}

func newFire(t *testing.T, d rt.Device, r *rand.Rand, h int) *fire {
	const C, S, E, K = 96, 40, 12, 10
	hw := h * h
	x := randVals(r, rt.F32, C*hw, -1, 1)
	wq := randVals(r, rt.F32, S*C, -1, 1)
	w1 := randVals(r, rt.F32, E*S, -1, 1)
	w3 := randVals(r, rt.F32, E*S*9, -1, 1)
	wk := randVals(r, rt.F32, K*2*E, -1, 1)
	bq := randVals(r, rt.F32, S, -1, 1)
	f := &fire{sb: newBuf(t, d, rt.F32, S*hw, nil), yb: newBuf(t, d, rt.F32, 2*E*hw, nil), zb: newBuf(t, d, rt.F32, K*hw, nil)}
	buf := func(v []float64) rt.Ref { return newBuf(t, d, rt.F32, len(v), v).ref([]int{len(v)}, nil) }
	conv := func(x, w rt.Ref, y rt.Ref, c, k, kh int) *rt.Conv {
		return &rt.Conv{X: x, W: w, Y: y, N: 1, C: c, H: h, Width: h, K: k, OH: h, OW: h, KH: kh, KW: kh,
			StrideH: 1, StrideW: 1, PadT: kh / 2, PadL: kh / 2, DilH: 1, DilW: 1, Groups: 1, Act: rt.Activation{Fn: rt.Relu}}
	}
	sq := conv(buf(x), buf(wq), f.sb.ref([]int{S * hw}, nil), C, S, 1)
	sq.Bias = buf(bq)
	y1 := f.yb.ref([]int{E * hw}, nil)
	y3 := y1
	y3.Off += int64(4 * E * hw)
	f.ops = []rt.Op{sq,
		conv(f.sb.ref([]int{S * hw}, nil), buf(w1), y1, S, E, 1),
		conv(f.sb.ref([]int{S * hw}, nil), buf(w3), y3, S, E, 3),
		conv(f.yb.ref([]int{2 * E * hw}, nil), buf(wk), f.zb.ref([]int{K * hw}, nil), 2*E, K, 1)}

	relu := func(v []float64) []float64 {
		for i := range v {
			v[i] = math.Max(v[i], 0)
		}
		return v
	}
	sw, _ := convRef(x, wq, bq, 1, C, h, h, S, h, h, 1, 1, 1, 1, 0, 0, 1, 1, 1)
	sw = relu(sw)
	r1, _ := convRef(sw, w1, nil, 1, S, h, h, E, h, h, 1, 1, 1, 1, 0, 0, 1, 1, 1)
	r3, _ := convRef(sw, w3, nil, 1, S, h, h, E, h, h, 3, 3, 1, 1, 1, 1, 1, 1, 1)
	yw := relu(append(r1, r3...))
	f.want, f.mag = convRef(yw, wk, nil, 1, 2*E, h, h, K, h, h, 1, 1, 1, 1, 0, 0, 1, 1, 1)
	f.want = relu(f.want)
	return f
}

// check compares Z with the float64 reference.
func (f *fire) check(t *testing.T, d rt.Device, what string) {
	t.Helper()
	got := f.zb.read(t, d)
	for i := range f.want {
		if math.Abs(got[i]-f.want[i]) > 1e-5*(f.mag[i]+1) {
			t.Fatalf("%s: Z[%d] = %v, want %v", what, i, got[i], f.want[i])
		}
	}
}
