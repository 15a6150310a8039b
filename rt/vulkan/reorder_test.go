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
	t.Setenv(fixupEnv, "0") // two dispatches per convolution (TestSplitKFixup has the fixup's barriers)
	const C, S, E, K, H = 96, 40, 12, 10, 7
	hw := H * H
	x := randVals(r, rt.F32, C*hw, -1, 1)
	wq := randVals(r, rt.F32, S*C, -1, 1)
	w1 := randVals(r, rt.F32, E*S, -1, 1)
	w3 := randVals(r, rt.F32, E*S*9, -1, 1)
	wk := randVals(r, rt.F32, K*2*E, -1, 1)
	bq := randVals(r, rt.F32, S, -1, 1)
	sb := newBuf(t, d, rt.F32, S*hw, nil)
	yb := newBuf(t, d, rt.F32, 2*E*hw, nil)
	zb := newBuf(t, d, rt.F32, K*hw, nil)
	conv := func(x, w rt.Ref, y rt.Ref, c, k, kh int) *rt.Conv {
		return &rt.Conv{X: x, W: w, Y: y, N: 1, C: c, H: H, Width: H, K: k, OH: H, OW: H, KH: kh, KW: kh,
			StrideH: 1, StrideW: 1, PadT: kh / 2, PadL: kh / 2, DilH: 1, DilW: 1, Groups: 1, Act: rt.Activation{Fn: rt.Relu}}
	}
	sq := conv(newBuf(t, d, rt.F32, len(x), x).ref([]int{len(x)}, nil), newBuf(t, d, rt.F32, len(wq), wq).ref([]int{len(wq)}, nil),
		sb.ref([]int{S * hw}, nil), C, S, 1)
	sq.Bias = newBuf(t, d, rt.F32, S, bq).ref([]int{S}, nil)
	y1 := yb.ref([]int{E * hw}, nil)
	y3 := y1
	y3.Off += int64(4 * E * hw)
	e1 := conv(sb.ref([]int{S * hw}, nil), newBuf(t, d, rt.F32, len(w1), w1).ref([]int{len(w1)}, nil), y1, S, E, 1)
	e3 := conv(sb.ref([]int{S * hw}, nil), newBuf(t, d, rt.F32, len(w3), w3).ref([]int{len(w3)}, nil), y3, S, E, 3)
	nx := conv(yb.ref([]int{2 * E * hw}, nil), newBuf(t, d, rt.F32, len(wk), wk).ref([]int{len(wk)}, nil), zb.ref([]int{K * hw}, nil), 2*E, K, 1)

	relu := func(v []float64) []float64 {
		for i := range v {
			v[i] = math.Max(v[i], 0)
		}
		return v
	}
	sw, _ := convRef(x, wq, bq, 1, C, H, H, S, H, H, 1, 1, 1, 1, 0, 0, 1, 1, 1)
	sw = relu(sw)
	r1, _ := convRef(sw, w1, nil, 1, S, H, H, E, H, H, 1, 1, 1, 1, 0, 0, 1, 1, 1)
	r3, _ := convRef(sw, w3, nil, 1, S, H, H, E, H, H, 3, 3, 1, 1, 1, 1, 1, 1, 1)
	yw := relu(append(r1, r3...))
	zw, za := convRef(yw, wk, nil, 1, 2*E, H, H, K, H, H, 1, 1, 1, 1, 0, 0, 1, 1, 1)
	zw = relu(zw)

	barriers := map[string]int{}
	for _, mode := range []string{"1", "0"} {
		t.Setenv("VRUN_VK_REORDER", mode)
		st, err := d.NewStream(rt.StreamOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range []rt.Op{sq, e1, e3, nx} {
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
		got := zb.read(t, d)
		for i := range zw {
			if math.Abs(got[i]-zw[i]) > 1e-5*(za[i]+1) {
				t.Fatalf("VRUN_VK_REORDER=%s: Z[%d] = %v, want %v", mode, i, got[i], zw[i])
			}
		}
	}
	t.Logf("barriers: %d in level order, %d in launch order", barriers["1"], barriers["0"])
	if barriers["1"] >= barriers["0"] {
		t.Errorf("level order recorded %d barriers, launch order %d: want fewer", barriers["1"], barriers["0"])
	}
}
