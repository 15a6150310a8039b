package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/vrun-go/vrun"
)

// convert implements "vrun convert model.onnx -o model.bin": it imports
// the ONNX model (listing every unsupported operator at once), checks that
// it plans, and writes it in vrun's model.bin format. Without -o the output
// is the input path with its extension replaced by .bin.
func convert(f *runFlags, pos []string, stdout io.Writer) error {
	if len(pos) != 1 {
		return usageError{"convert needs one .onnx model file"}
	}
	in := pos[0]
	out := f.outDir
	if out == "" {
		out = strings.TrimSuffix(in, filepath.Ext(in)) + ".bin"
	}
	if out == in {
		return usageError{"convert: the output would overwrite the input; give -o"}
	}
	g, err := vrun.LoadGraph(in)
	if err != nil {
		return err
	}
	defer g.Close()
	tmp, err := os.CreateTemp(filepath.Dir(out), ".vrun-convert-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	n, err := g.WriteTo(tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("convert: writing %s: %w", out, err)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d nodes, %d tensors -> %s (%s)\n", in, len(g.Nodes), len(g.Tensors), out, vrun.FormatBytes(n))
	return nil
}
