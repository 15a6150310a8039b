package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/vrun-go/vrun"
)

const convertUsage = `Usage: vrun convert [flags] MODEL.onnx

convert imports an ONNX model (listing every unsupported operator at once)
and writes it in vrun's model.bin format, with aligned weights that load
memory-mapped. Without -o the output is MODEL.bin beside the input. The
file is written under a temporary name and renamed into place, with mode
0644, and its path is printed.

Flags:
`

// convertCmd implements "vrun convert model.onnx -o model.bin".
func convertCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("vrun convert", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("o", "", "write the model to `FILE` (default: the input with .bin for its extension)")
	js := fs.Bool("json", false, "print what was written as JSON")
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, convertUsage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return nil
	}
	if err != nil {
		return err
	}
	return convert(pos, *out, *js, stdout)
}

// convert writes the model.bin form of the ONNX model pos[0] to out.
func convert(pos []string, out string, js bool, stdout io.Writer) error {
	if len(pos) != 1 {
		return usageError{"convert needs one .onnx model file"}
	}
	in := pos[0]
	if out == "" {
		out = strings.TrimSuffix(in, filepath.Ext(in)) + ".bin"
	}
	if filepath.Clean(out) == filepath.Clean(in) {
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
	if err == nil {
		err = tmp.Chmod(0o644) // CreateTemp makes 0600
		if errors.Is(err, errors.ErrUnsupported) {
			err = nil
		}
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("convert: writing %s: %w", out, err)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return err
	}
	if js {
		return writeJSON(stdout, map[string]any{"input": in, "output": out, "nodes": len(g.Nodes), "tensors": len(g.Tensors), "bytes": n})
	}
	fmt.Fprintf(stdout, "%s: %d nodes, %d tensors -> %s (%s)\n", in, len(g.Nodes), len(g.Tensors), out, vrun.FormatBytes(n))
	fmt.Fprintf(stdout, "wrote    %s\n", out)
	return nil
}
