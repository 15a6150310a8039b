// Command cnnmodels writes convolutional networks with random weights as
// ONNX files, for timing vrun's CPU convolutions beside onnxruntime with
// bench/ort:
//
//	go run ./bench/ort/cnnmodels DIR
//	go run ./bench/ort -models none DIR/*.onnx
//
// The networks are LeNet-5 (conv 1→6 5×5 pad 2, conv 6→16 5×5, both
// followed by ReLU and 2×2 max pooling, then 400-120-84-10) at batch 64
// and 1000, MobileNetV2 (width 1.0, 224×224, the torchvision layout:
// inverted residuals with depthwise 3×3 convolutions, BatchNormalization
// and ReLU6 as Clip) and ResNet-18 (224×224), both at batch 1. Weights are
// uniform in ±1/sqrt(fan-in) from a fixed seed, so the activations stay
// of order 1.
package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/vrun-go/vrun/export"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: cnnmodels DIR")
		os.Exit(2)
	}
	dir := os.Args[1]
	for _, m := range []struct {
		name  string
		build func(*net) string
	}{
		{"lenet_b64", func(n *net) string { return lenet(n, 64) }},
		{"lenet_b1000", func(n *net) string { return lenet(n, 1000) }},
		{"mobilenet_v2", mobilenetV2},
		{"resnet18", resnet18},
	} {
		if err := write(filepath.Join(dir, m.name+".onnx"), m.build); err != nil {
			fmt.Fprintln(os.Stderr, "cnnmodels:", m.name+":", err)
			os.Exit(1)
		}
	}
}

// net builds one model with random weights.
type net struct {
	b   *model.Builder
	rng *rand.Rand
	n   int
}

func write(path string, build func(*net) string) error {
	n := &net{b: model.NewBuilder(), rng: rand.New(rand.NewPCG(1, 2))}
	y := build(n)
	n.b.Node("output", "Identity", []string{y}, []string{"y"}, nil)
	n.b.Output("y")
	m, err := n.b.Build()
	if err != nil {
		return err
	}
	return export.ONNX(path, m)
}

// weight declares a random weight of the given shape, uniform in
// ±bound, or (when positive) around 1 ± bound.
func (n *net) weight(shape []int64, bound float64, around float64) string {
	size := int64(1)
	for _, d := range shape {
		size *= d
	}
	v := make([]float32, size)
	for i := range v {
		v[i] = float32(around + bound*(2*n.rng.Float64()-1))
	}
	n.n++
	return n.b.Weight(fmt.Sprintf("w%d", n.n), rt.F32, shape, v)
}

// conv adds a convolution of c input to k output channels, with bias
// when bias is set.
func (n *net) conv(x string, c, k, kernel, stride, pad, group int, bias bool) string {
	fan := float64(c / group * kernel * kernel)
	in := []string{x, n.weight([]int64{int64(k), int64(c / group), int64(kernel), int64(kernel)}, 1/math.Sqrt(fan), 0)}
	if bias {
		in = append(in, n.weight([]int64{int64(k)}, 0.1, 0))
	}
	return n.b.Op("Conv", in, model.Attrs{"kernel_shape": []int{kernel, kernel}, "strides": []int{stride, stride},
		"pads": []int{pad, pad, pad, pad}, "group": group})
}

// bn adds BatchNormalization over k channels.
func (n *net) bn(x string, k int) string {
	s := []int64{int64(k)}
	return n.b.Op("BatchNormalization", []string{x, n.weight(s, 0.5, 1), n.weight(s, 0.1, 0), n.weight(s, 0.1, 0), n.weight(s, 0.5, 1)},
		model.Attrs{"epsilon": 1e-5})
}

func (n *net) relu6(x string) string {
	lo := n.b.Weight(fmt.Sprintf("zero%d", n.n), rt.F32, []int64{}, []float32{0})
	hi := n.b.Weight(fmt.Sprintf("six%d", n.n), rt.F32, []int64{}, []float32{6})
	n.n++
	return n.b.Op("Clip", []string{x, lo, hi}, nil)
}

func (n *net) gemm(x string, in, out int) string {
	b := 1 / math.Sqrt(float64(in))
	return n.b.Op("Gemm", []string{x, n.weight([]int64{int64(out), int64(in)}, b, 0), n.weight([]int64{int64(out)}, b, 0)},
		model.Attrs{"transB": 1})
}

func lenet(n *net, batch int64) string {
	x := n.b.Input("x", rt.F32, batch, 1, 28, 28)
	pool := model.Attrs{"kernel_shape": []int{2, 2}, "strides": []int{2, 2}}
	h := n.b.Op("Relu", []string{n.conv(x, 1, 6, 5, 1, 2, 1, true)}, nil)
	h = n.b.Op("MaxPool", []string{h}, pool)
	h = n.b.Op("Relu", []string{n.conv(h, 6, 16, 5, 1, 0, 1, true)}, nil)
	h = n.b.Op("MaxPool", []string{h}, pool)
	h = n.b.Op("Flatten", []string{h}, nil)
	h = n.b.Op("Relu", []string{n.gemm(h, 400, 120)}, nil)
	h = n.b.Op("Relu", []string{n.gemm(h, 120, 84)}, nil)
	return n.gemm(h, 84, 10)
}

func mobilenetV2(n *net) string {
	x := n.b.Input("x", rt.F32, 1, 3, 224, 224)
	cbr := func(x string, c, k, kernel, stride, group int) string {
		return n.relu6(n.bn(n.conv(x, c, k, kernel, stride, (kernel-1)/2, group, false), k))
	}
	h := cbr(x, 3, 32, 3, 2, 1)
	c := 32
	for _, s := range [][4]int{{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2}, {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}} {
		t, k, reps, stride := s[0], s[1], s[2], s[3]
		for r := 0; r < reps; r++ {
			st := stride
			if r > 0 {
				st = 1
			}
			in, hid := h, c*t
			if t != 1 {
				h = cbr(h, c, hid, 1, 1, 1)
			}
			h = cbr(h, hid, hid, 3, st, hid)
			h = n.bn(n.conv(h, hid, k, 1, 1, 0, 1, false), k)
			if st == 1 && c == k {
				h = n.b.Op("Add", []string{in, h}, nil)
			}
			c = k
		}
	}
	h = cbr(h, c, 1280, 1, 1, 1)
	h = n.b.Op("GlobalAveragePool", []string{h}, nil)
	h = n.b.Op("Flatten", []string{h}, nil)
	return n.gemm(h, 1280, 1000)
}

func resnet18(n *net) string {
	x := n.b.Input("x", rt.F32, 1, 3, 224, 224)
	h := n.b.Op("Relu", []string{n.bn(n.conv(x, 3, 64, 7, 2, 3, 1, false), 64)}, nil)
	h = n.b.Op("MaxPool", []string{h}, model.Attrs{"kernel_shape": []int{3, 3}, "strides": []int{2, 2}, "pads": []int{1, 1, 1, 1}})
	c := 64
	for _, s := range [][2]int{{64, 1}, {64, 1}, {128, 2}, {128, 1}, {256, 2}, {256, 1}, {512, 2}, {512, 1}} {
		k, st := s[0], s[1]
		a := n.b.Op("Relu", []string{n.bn(n.conv(h, c, k, 3, st, 1, 1, false), k)}, nil)
		a = n.bn(n.conv(a, k, k, 3, 1, 1, 1, false), k)
		sc := h
		if st != 1 || c != k {
			sc = n.bn(n.conv(h, c, k, 1, st, 0, 1, false), k)
		}
		h = n.b.Op("Relu", []string{n.b.Op("Add", []string{a, sc}, nil)}, nil)
		c = k
	}
	h = n.b.Op("GlobalAveragePool", []string{h}, nil)
	h = n.b.Op("Flatten", []string{h}, nil)
	return n.gemm(h, 512, 1000)
}
