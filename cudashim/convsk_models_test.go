//go:build cgo

package cudashim

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/internal/realmodels"
	"github.com/vrun-go/vrun/model/onnx"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

// BenchmarkModelsSplitK times batch-1 inference of the models that
// testdata/models/export.py writes into $VRUN_BENCH_MODELS (resnet18,
// resnet50, mobilenet_v2, squeezenet1_1), with the small-grid split-K
// path ("splitk") and without it ("cudnn": VRUN_CUDA_SPLITK=0), through
// Session.RunDevice on a resident input (one CUDA-graph replay per run,
// as vrun -bench -resident), reporting the median ms/run; each output is
// checked against the model's PyTorch reference (<name>.torch.npy):
//
//	VRUN_BENCH_MODELS=/tmp/models go test -run XXX -bench ModelsSplitK -benchtime 200x ./cudashim
func BenchmarkModelsSplitK(b *testing.B) {
	dir := os.Getenv("VRUN_BENCH_MODELS")
	if dir == "" {
		b.Skip("VRUN_BENCH_MODELS (a directory written by testdata/models/export.py) is not set")
	}
	d := openTest(b, true)
	for _, name := range []string{"resnet18", "resnet50", "mobilenet_v2", "squeezenet1_1"} {
		base := filepath.Join(dir, name)
		if _, err := os.Stat(base + ".onnx"); err != nil {
			b.Logf("%s: %v", name, err)
			continue
		}
		for _, mode := range []string{"splitk", "cudnn"} {
			b.Run(name+"/"+mode, func(b *testing.B) {
				if mode == "cudnn" {
					b.Setenv(splitKEnv, "0")
				}
				m, err := onnx.ImportFile(base+".onnx", onnx.Options{Supported: engine.SupportedOps})
				if err != nil {
					b.Fatal(err)
				}
				x, err := npy.ReadFile(base + ".x.npy")
				if err != nil {
					b.Fatal(err)
				}
				want, err := npy.ReadFile(base + ".torch.npy")
				if err != nil {
					b.Fatal(err)
				}
				in, out := m.Tensors[m.Inputs()[0]].Name, m.Tensors[m.Outputs()[0]].Name
				s, err := engine.New(m, d, engine.Options{Shapes: map[string][]int{in: x.Shape}})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				xd, err := s.Pool().ToDevice(x)
				if err != nil {
					b.Fatal(err)
				}
				defer xd.Free()
				sk := d.skUsed.Load()
				ctx := context.Background()
				run := func(check bool) {
					res, err := s.RunDevice(ctx, map[string]*rt.DeviceTensor{in: xd})
					if err != nil {
						b.Fatal(err)
					}
					if check {
						y, err := res[out].ToHost()
						if err != nil {
							b.Fatal(err)
						}
						if rel, i, err := realmodels.MaxError(y, want); err != nil || !(rel <= realmodels.Tol) {
							b.Errorf("%s: max error %.3g of max|want| at %d (%v)", name, rel, i, err)
						}
					}
					for _, t := range res {
						t.Free()
					}
				}
				run(true)
				for i := 0; i < 10; i++ {
					run(false)
				}
				convs := d.skUsed.Load() - sk
				times := make([]time.Duration, b.N)
				b.ResetTimer()
				for i := range times {
					t0 := time.Now()
					run(false)
					times[i] = time.Since(t0)
				}
				b.StopTimer()
				sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
				b.ReportMetric(float64(times[len(times)/2].Microseconds())/1e3, "ms/run")
				b.ReportMetric(float64(convs), "splitk-convs")
			})
		}
	}
}
