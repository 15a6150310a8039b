package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

func main() {
	if err := build("../../testdata/demo", "demo"); err != nil {
		fmt.Fprintln(os.Stderr, "mkdemo:", err)
		os.Exit(1)
	}
}

func build(src, dst string) error {
	load := func(name string) (*rt.Tensor, error) { return npy.ReadFile(filepath.Join(src, name+".npy")) }
	b := model.NewBuilder()
	b.Meta("description", "MLP 64-48-10 trained on the 8x8 handwritten digits set (scikit-learn), see testdata/demo/train_digits.py")
	b.Meta("labels", "0,1,2,3,4,5,6,7,8,9")
	x := b.Input("image", rt.F32, -1, 1, 8, 8)
	b.DimNames(x, "batch", "", "", "")
	h := b.Op("Flatten", []string{x}, model.Attrs{"axis": 1})
	for i, act := range []string{"Relu", ""} {
		w, err := load(fmt.Sprintf("fc%d_w", i+1))
		if err != nil {
			return err
		}
		bias, err := load(fmt.Sprintf("fc%d_b", i+1))
		if err != nil {
			return err
		}
		wn := b.Weight(fmt.Sprintf("fc%d.weight", i+1), rt.F32, []int64{int64(w.Shape[0]), int64(w.Shape[1])}, w.Data)
		bn := b.Weight(fmt.Sprintf("fc%d.bias", i+1), rt.F32, []int64{int64(bias.Shape[0])}, bias.Data)
		h = b.Op("Gemm", []string{h, wn, bn}, nil)
		if act != "" {
			h = b.Op(act, []string{h}, nil)
		}
	}
	b.Node("softmax", "Softmax", []string{h}, []string{"probs"}, nil)
	b.Output("probs")
	m, err := b.Build()
	if err != nil {
		return err
	}
	if err := model.WriteFile(filepath.Join(dst, "digits.bin"), m); err != nil {
		return err
	}
	for _, f := range []string{"test_x.npy", "test_y.npy"} {
		if err := copyFile(filepath.Join(src, f), filepath.Join(dst, f)); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
