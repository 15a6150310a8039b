package engine_test

import (
	"context"
	"math"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/rt"
)

// TestConcatElision checks that Concat inputs are computed in place in
// the Concat output where that is safe (the copies the plan keeps, with
// the default 16-byte alignment of the parts and with any 4-byte
// alignment), and that the outputs match a float64 reference within 1e-4
// of max(|want|, 1) (f32) and the runs with VRUN_CONCAT_ELIDE=0 within
// 1e-6. The graphs: Concats of Conv, MatMul and elementwise results at
// batch 1 (computed in place) and batch 2 and 3 (copied, except Conv
// results where the backend writes them into the output), with ReLU fused into
// the Convs, along axis 0 and a later axis, with 3 parts of odd sizes,
// nested, with a part read after the Concat (in place or not), a part
// that is a graph output, the same tensor twice, and an output written in
// place after the Concat.
func TestConcatElision(t *testing.T) {
	forEachBackend(t, testConcatElision)
}

// stridedAll is the copies left on every backend that writes Convs into a
// Concat output at batch > 1 (the Vulkan and OpenCL backends).
func stridedAll(n int) map[string]int { return map[string]int{"vulkan:0": n, "opencl:0": n} }

func testConcatElision(t *testing.T, spec string) {
	cases := []struct {
		name  string
		build func(g *refGraph) []string // the outputs
		// Copies left: with 16-byte aligned parts (the default), with
		// 4-byte aligned ones, and without elision.
		copies16, copies4, copiesOff int
		// strided, where set, is the copies left with elision on a
		// backend (by spec) that writes Convs into a Concat output at
		// batch > 1 (rt.Conv.StrideY); elsewhere copies16 and copies4.
		strided map[string]int
	}{
		{"conv_b1_odd", func(g *refGraph) []string {
			x := g.input(1, 3, 5, 7)
			return []string{g.concat(1, g.conv(x, 5, 1), g.conv(x, 6, 3))} // the second at byte 700
		}, 1, 0, 2, nil},
		{"conv_b1", func(g *refGraph) []string {
			x := g.input(1, 3, 5, 7)
			return []string{g.concat(1, g.conv(x, 8, 1), g.conv(x, 4, 3))}
		}, 0, 0, 2, nil},
		{"conv_b2", func(g *refGraph) []string {
			x := g.input(2, 5, 5, 7)
			return []string{g.concat(1, g.conv(x, 8, 1), g.conv(x, 12, 3))}
		}, 2, 2, 2, stridedAll(0)},
		{"conv_relu_b3", func(g *refGraph) []string {
			x := g.input(3, 5, 5, 7)
			return []string{g.concat(1, g.unary("Relu", g.conv(x, 8, 1)), g.unary("Relu", g.conv(x, 12, 3)))}
		}, 2, 2, 2, stridedAll(0)},
		// Vulkan runs a 4-channel Conv on its direct kernel, which does
		// not write images apart: that part keeps its copy. OpenCL's
		// direct kernel (conv_direct) writes them apart.
		{"conv_b2_direct", func(g *refGraph) []string {
			x := g.input(2, 5, 5, 7)
			return []string{g.concat(1, g.conv(x, 8, 1), g.conv(x, 4, 3))}
		}, 2, 2, 2, map[string]int{"vulkan:0": 1, "opencl:0": 0}},
		{"conv_b2_mixed", func(g *refGraph) []string {
			x, z := g.input(2, 5, 5, 7), g.input(2, 2, 5, 7)
			return []string{g.concat(1, g.conv(x, 8, 1), g.unary("Sigmoid", z), g.conv(x, 12, 3))}
		}, 3, 3, 3, stridedAll(1)},
		{"conv_b2_read_after", func(g *refGraph) []string {
			x := g.input(2, 5, 5, 7)
			a := g.conv(x, 8, 1)
			return []string{g.concat(1, a, g.conv(x, 12, 3)), g.conv(a, 3, 3)}
		}, 2, 2, 2, stridedAll(1)},
		{"conv_b2_part_is_output", func(g *refGraph) []string {
			x := g.input(2, 5, 5, 7)
			a := g.conv(x, 8, 1)
			return []string{g.concat(1, a, g.conv(x, 12, 3)), a}
		}, 2, 2, 2, stridedAll(1)},
		{"nested_b2", func(g *refGraph) []string {
			x := g.input(2, 5, 5, 7)
			inner := g.concat(1, g.conv(x, 8, 1), g.conv(x, 12, 3))
			return []string{g.concat(1, g.conv(x, 8, 1), inner)}
		}, 4, 4, 4, stridedAll(1)},
		{"conv_relu_b1", func(g *refGraph) []string {
			x := g.input(1, 3, 5, 7)
			return []string{g.concat(1, g.unary("Relu", g.conv(x, 8, 1)), g.unary("Relu", g.conv(x, 4, 3)))}
		}, 0, 0, 2, nil},
		{"conv_3parts_odd", func(g *refGraph) []string {
			x := g.input(1, 2, 5, 7)
			return []string{g.concat(1, g.conv(x, 1, 1), g.conv(x, 2, 3), g.unary("Relu", g.conv(x, 3, 1)))}
		}, 2, 0, 3, nil},
		{"conv_axis0", func(g *refGraph) []string {
			x := g.input(1, 3, 5, 7)
			return []string{g.concat(0, g.conv(x, 8, 1), g.conv(x, 8, 3))}
		}, 0, 0, 2, nil},
		{"matmul_axis0", func(g *refGraph) []string {
			a, b, c := g.input(3, 6), g.input(4, 6), g.input(2, 6)
			return []string{g.concat(0, g.matmul(a, 5), g.matmul(b, 5), g.matmul(c, 5))} // at bytes 0, 60, 140
		}, 2, 0, 3, nil},
		{"matmul_axis1", func(g *refGraph) []string {
			x := g.input(3, 6)
			return []string{g.concat(1, g.matmul(x, 5), g.matmul(x, 7))}
		}, 2, 2, 2, nil},
		{"matmul_axis1_b1", func(g *refGraph) []string {
			x := g.input(1, 6)
			return []string{g.concat(1, g.matmul(x, 8), g.matmul(x, 7), g.matmul(x, 4))} // at bytes 0, 32, 60
		}, 1, 0, 3, nil},
		{"elementwise", func(g *refGraph) []string {
			x, y, z := g.input(1, 4, 3, 5), g.input(1, 4, 3, 5), g.input(1, 2, 3, 5)
			return []string{g.concat(1, g.binary("Add", x, y), g.binary("Mul", x, y), g.unary("Sigmoid", z))}
		}, 0, 0, 3, nil},
		{"elementwise_b2", func(g *refGraph) []string {
			x, y := g.input(2, 4, 3, 5), g.input(2, 4, 3, 5)
			return []string{g.concat(1, g.binary("Add", x, y), g.unary("Sigmoid", y))}
		}, 2, 2, 2, nil},
		{"later_axis", func(g *refGraph) []string {
			x, y := g.input(1, 1, 6, 5), g.input(1, 1, 3, 5)
			return []string{g.concat(2, g.unary("Relu", x), g.unary("Sigmoid", y))} // the second at byte 120
		}, 1, 0, 2, nil},
		{"nested", func(g *refGraph) []string {
			x := g.input(1, 3, 5, 7)
			inner := g.concat(1, g.conv(x, 4, 1), g.conv(x, 4, 3))
			return []string{g.concat(1, g.conv(x, 8, 1), inner, g.unary("Relu", g.conv(x, 4, 3)))}
		}, 0, 0, 5, nil},
		{"part_read_after", func(g *refGraph) []string {
			x := g.input(1, 3, 5, 7)
			a := g.conv(x, 8, 1)
			return []string{g.concat(1, a, g.conv(x, 4, 3)), g.conv(a, 3, 3)}
		}, 0, 0, 2, nil},
		{"part_read_before", func(g *refGraph) []string {
			x := g.input(1, 3, 5, 7)
			a := g.conv(x, 8, 1)
			return []string{g.concat(1, a, g.conv(a, 4, 3))}
		}, 0, 0, 2, nil},
		{"part_relu_in_place_after", func(g *refGraph) []string {
			x := g.input(1, 3, 5, 7)
			a := g.conv(x, 8, 1)
			y := g.concat(1, a, g.conv(x, 4, 3))
			return []string{y, g.conv(g.unary("Relu", a), 3, 1)} // the Relu writes a in place
		}, 1, 1, 2, nil},
		{"output_written_after", func(g *refGraph) []string {
			x := g.input(1, 3, 5, 7)
			a := g.conv(x, 8, 1)
			y := g.concat(1, a, g.conv(x, 4, 3))
			return []string{g.unary("Relu", y), g.conv(a, 3, 1)} // a is read after the Relu wrote y
		}, 1, 1, 2, nil},
		{"part_is_output", func(g *refGraph) []string {
			x := g.input(1, 3, 5, 7)
			a := g.conv(x, 8, 1)
			return []string{g.concat(1, a, g.conv(x, 4, 3)), a}
		}, 1, 1, 2, nil},
		{"input_part", func(g *refGraph) []string {
			x := g.input(1, 4, 5, 4)
			return []string{g.concat(1, x, g.conv(x, 4, 3))}
		}, 1, 1, 2, nil},
		{"same_twice", func(g *refGraph) []string {
			x := g.input(1, 4, 5, 4)
			r := g.unary("Relu", x)
			return []string{g.concat(1, r, r)}
		}, 1, 1, 2, nil},
	}
	dev := dpDevices(t, spec)[0]
	for _, cs := range cases {
		t.Run(cs.name, func(t *testing.T) {
			g := newRefGraph(uint64(len(cs.name)))
			outs := cs.build(g)
			g.b.Output(outs...)
			m, err := g.b.Build()
			if err != nil {
				t.Fatal(err)
			}
			var base map[string]*rt.Tensor
			var offOps map[string]int
			for _, run := range []struct {
				name   string
				elide  string
				align  int64
				copies int
			}{
				{"off", "0", 16, cs.copiesOff},
				{"align16", "1", 16, cs.copies16},
				{"align4", "1", 4, cs.copies4},
			} {
				if n, ok := cs.strided[spec]; ok && run.elide == "1" {
					run.copies = n
				}
				t.Setenv("VRUN_CONCAT_ELIDE", run.elide)
				old := engine.SetConcatAlign(run.align)
				s, err := engine.New(m, dev, engine.Options{})
				engine.SetConcatAlign(old)
				if err != nil {
					t.Fatal(err)
				}
				info := s.Info()
				if got := info.OpCounts["Unary.Copy"]; got != run.copies {
					t.Errorf("%s: %d copies, want %d (ops %v)", run.name, got, run.copies, info.OpCounts)
				}
				// Only copies go: the other ops (ReLUs fused into the
				// Convs or not) are those of the plan without elision.
				if offOps == nil {
					offOps = info.OpCounts
				}
				for op, n := range offOps {
					if op != "Unary.Copy" && info.OpCounts[op] != n {
						t.Errorf("%s: ops %v, without elision %v", run.name, info.OpCounts, offOps)
						break
					}
				}
				res, err := s.Run(context.Background(), g.feeds)
				s.Close()
				if err != nil {
					t.Fatalf("%s: %v", run.name, err)
				}
				for _, o := range outs {
					got, want := res[o].Float64s(), g.vals[o].d
					if len(got) != len(want) {
						t.Fatalf("%s: %s has %d values, want %d", run.name, o, len(got), len(want))
					}
					for i := range want {
						if d := math.Abs(got[i] - want[i]); !(d <= 1e-4*math.Max(math.Abs(want[i]), 1)) {
							t.Fatalf("%s: %s[%d] = %v, want %v (float64)", run.name, o, i, got[i], want[i])
						}
					}
					if base == nil {
						continue
					}
					b := base[o].Float64s()
					for i := range b {
						if d := math.Abs(got[i] - b[i]); !(d <= 1e-6*math.Max(math.Abs(b[i]), 1)) {
							t.Fatalf("%s: %s[%d] = %v, without elision %v", run.name, o, i, got[i], b[i])
						}
					}
				}
				if base == nil {
					base = res
				}
			}
		})
	}
}
