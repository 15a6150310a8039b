// Command mk builds testdata/e2e/mlp.bin and cnn.bin from the NumPy
// reference weights that gen.py wrote. Run it with `go generate ./testdata/e2e`
// (the e2e package's gen.go) after gen.py.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

func main() {
	for name, build := range map[string]func(*model.Builder, func(string) string) string{"mlp": mlp, "cnn": cnn} {
		if err := write(name, build); err != nil {
			fmt.Fprintln(os.Stderr, "mk:", err)
			os.Exit(1)
		}
	}
}

// write builds one model; w(name) loads name.npy as a weight.
func write(name string, build func(*model.Builder, func(string) string) string) error {
	b := model.NewBuilder()
	var err error
	w := func(n string) string {
		t, e := npy.ReadFile(filepath.Join(name, n+".npy"))
		if e != nil {
			err = e
			return ""
		}
		shape := make([]int64, len(t.Shape))
		for i, d := range t.Shape {
			shape[i] = int64(d)
		}
		return b.Weight(n, t.DType, shape, t.Data)
	}
	b.Meta("description", "vrun end-to-end test model "+name+"; reference outputs from testdata/e2e/gen.py (NumPy)")
	y := build(b, w)
	if err != nil {
		return err
	}
	b.Node("output", "Identity", []string{y}, []string{"y"}, nil)
	b.Output("y")
	m, err := b.Build()
	if err != nil {
		return err
	}
	return model.WriteFile(name+".bin", m)
}

// MLP builds the model that gen.py computes as "mlp".
func mlp(b *model.Builder, w func(string) string) string {
	x := b.Input("x", rt.F32, -1, 37)
	b.DimNames(x, "batch", "")
	h := b.Op("Gemm", []string{x, w("w1"), w("b1")}, nil)
	h = b.Op("Gelu", []string{h}, nil)
	h = b.Op("Gemm", []string{h, w("w2"), w("b2")}, model.Attrs{"transB": 1})
	h = b.Op("LayerNormalization", []string{h, w("ln_g"), w("ln_b")}, model.Attrs{"axis": -1, "epsilon": 1e-5})
	return b.Op("Softmax", []string{h}, model.Attrs{"axis": -1})
}

// CNN builds the model that gen.py computes as "cnn".
func cnn(b *model.Builder, w func(string) string) string {
	x := b.Input("x", rt.F32, -1, 3, 15, 13)
	b.DimNames(x, "batch", "", "", "")
	h := b.Op("Conv", []string{x, w("c1w"), w("c1b")}, model.Attrs{"pads": []int{1, 1, 1, 1}})
	h = b.Op("BatchNormalization", []string{h, w("bn_s"), w("bn_b"), w("bn_m"), w("bn_v")}, model.Attrs{"epsilon": 1e-5})
	h = b.Op("Relu", []string{h}, nil)
	h = b.Op("MaxPool", []string{h}, model.Attrs{"kernel_shape": []int{2, 2}, "strides": []int{2, 2}})
	h = b.Op("Conv", []string{h, w("c2w"), w("c2b")}, model.Attrs{"strides": []int{2, 2}, "pads": []int{1, 0, 2, 1}, "group": 2})
	h = b.Op("Relu", []string{h}, nil)
	h = b.Op("Conv", []string{h, w("c3w")}, model.Attrs{"pads": []int{2, 2, 2, 2}, "dilations": []int{2, 2}, "group": 8})
	h = b.Op("Relu", []string{h}, nil)
	h = b.Op("GlobalAveragePool", []string{h}, nil)
	h = b.Op("Flatten", []string{h}, nil)
	h = b.Op("Gemm", []string{h, w("fw"), w("fb")}, model.Attrs{"transB": 1})
	return b.Op("Softmax", []string{h}, nil)
}
