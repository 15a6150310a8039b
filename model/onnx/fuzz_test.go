package onnx

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/vrun-go/vrun/model/onnx/onnxpb"
)

// FuzzImport feeds arbitrary bytes to Import: it must never panic, and a
// model it accepts must validate. Seeds are small corpus models in
// testdata/onnx/fuzzseed plus a few hand-built ones.
func FuzzImport(f *testing.F) {
	seeds, _ := filepath.Glob("../../testdata/onnx/fuzzseed/*.onnx")
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	g := graph{opset: 6, nodes: []*onnxpb.NodeProto{
		nd("Clip", "c", []string{"x"}, []string{"a"}, aFloat("min", 0)),
		nd("Softmax", "s", []string{"a"}, []string{"b"}),
		nd("Identity", "i", []string{"b"}, []string{"y"}),
	}, inputs: []*onnxpb.ValueInfoProto{vi("x", tFloat, "n", 3)}, outputs: []*onnxpb.ValueInfoProto{vi("y", tFloat)}}
	b, _ := proto.Marshal(g.proto())
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Import(data, Options{})
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("error wraps neither ErrInvalid nor ErrUnsupported: %v", err)
			}
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("imported model does not validate: %v", err)
		}
	})
}
