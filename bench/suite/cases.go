package main

import "fmt"

// gemmCase is an n×n×n f32 GEMM.
type gemmCase struct{ N int }

func (c gemmCase) name() string   { return fmt.Sprintf("f32/n=%d", c.N) }
func (c gemmCase) flops() float64 { n := float64(c.N); return 2 * n * n * n }

// gemvCase is y = x·W (form "xA": W is K×N, NumPy's x @ a) or y = W·x
// (form "Ax": W is N×K), f32; its rate counts W's bytes once.
type gemvCase struct {
	K, N int
	Form string
}

func (c gemvCase) name() string   { return fmt.Sprintf("f32/%dx%d/%s", c.K, c.N, c.Form) }
func (c gemvCase) bytes() float64 { return 4 * float64(c.K) * float64(c.N) }

// convCase is an f32 NCHW convolution with a bias and no activation.
type convCase struct {
	Name                         string
	N, C, H, K, KH, S, P, Groups int
}

func (c convCase) out() int { return (c.H+2*c.P-c.KH)/c.S + 1 }
func (c convCase) flops() float64 {
	o := float64(c.out())
	return 2 * float64(c.N) * float64(c.K) * o * o * float64(c.C/c.Groups) * float64(c.KH*c.KH)
}

// caseSet is what one device runs.
type caseSet struct {
	gemm []gemmCase
	gemv []gemvCase
	conv []convCase
}

// convs are batch-1 layers of resnet18/50 and mobilenet_v2.
var convs = []convCase{
	{"7x7s2 3-64 224", 1, 3, 224, 64, 7, 2, 3, 1},
	{"3x3 64-64 56", 1, 64, 56, 64, 3, 1, 1, 1},
	{"3x3 256-256 14", 1, 256, 14, 256, 3, 1, 1, 1},
	{"3x3 512-512 7", 1, 512, 7, 512, 3, 1, 1, 1},
	{"1x1 256-64 56", 1, 256, 56, 64, 1, 1, 0, 1},
	{"dw3x3 144 56", 1, 144, 56, 144, 3, 1, 1, 144},
}

// casesFor picks the cases for a device of class class; soft marks a
// software driver of a GPU API (lavapipe, pocl), which gets the CPU's
// smaller set, cut further.
func casesFor(class string, soft, quick bool) caseSet {
	switch {
	case quick:
		return caseSet{
			gemm: []gemmCase{{64}, {128}},
			gemv: []gemvCase{{256, 256, "xA"}},
			conv: []convCase{{"3x3 16-16 28", 1, 16, 28, 16, 3, 1, 1, 1}, {"dw3x3 16 28", 1, 16, 28, 16, 3, 1, 1, 16}},
		}
	case class == ClassGPU:
		return caseSet{
			gemm: []gemmCase{{1024}, {4096}, {8192}},
			gemv: []gemvCase{{4096, 14336, "xA"}, {4096, 4096, "xA"}},
			conv: convs,
		}
	case soft:
		return caseSet{
			gemm: []gemmCase{{256}, {1024}},
			gemv: []gemvCase{{4096, 4096, "xA"}},
			conv: convs[1:3],
		}
	}
	return caseSet{
		gemm: []gemmCase{{256}, {1024}, {2048}},
		gemv: []gemvCase{{4096, 4096, "xA"}, {4096, 4096, "Ax"}},
		conv: convs,
	}
}
