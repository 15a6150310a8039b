//go:build cgo

package clshim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// BenchmarkProgramBuild times clBuildProgram from source (no binary
// cache) of the programs an f32 CNN such as resnet18 uses: gemm.cl with
// the device's GEMM tile, whole (both kernels, the activation chosen at
// run time: every case of act's switch in the unrolled epilogues) or one
// kernel, with the activation chosen at run time (act=any) or fixed at
// build time as Launch builds it on a GPU (act=Relu, Copy); and the other
// families, whole (as on pocl) and with the one kernel that Launch
// builds them with on a GPU. Drivers keep caches of their own: run it with
// POCL_KERNEL_CACHE=0 on pocl and CUDA_CACHE_DISABLE=1 on NVIDIA.
func BenchmarkProgramBuild(b *testing.B) {
	for _, info := range testDevices(b) {
		d0, err := Backend{}.Open(info.Index)
		if err != nil {
			b.Fatal(err)
		}
		d := d0.(*device)
		tile := d.gemmShapes(rt.F32)[0]
		cases := []struct{ name, file, defines string }{
			{"gemm/both/act=any", "gemm.cl", tile.defs(rt.F32)},
			{"gemm/conv_gemm/act=any", "gemm.cl", tile.defs(rt.F32) + " -DONE_KERNEL -DKERNEL_conv_gemm"},
			{"gemm/conv_gemm/act=Relu", "gemm.cl", tile.defs(rt.F32) + fmt.Sprintf(" -DACT_FN=%d", rt.Relu) + " -DONE_KERNEL -DKERNEL_conv_gemm"},
			{"gemm/gemm/act=Copy", "gemm.cl", tile.defs(rt.F32) + fmt.Sprintf(" -DACT_FN=%d", rt.Copy) + " -DONE_KERNEL -DKERNEL_gemm"},
			{"conv/all", "conv.cl", typeDefs(rt.F32)},
			{"conv/pool", "conv.cl", typeDefs(rt.F32) + " -DONE_KERNEL -DKERNEL_pool"},
			{"elementwise/all", "elementwise.cl", typeDefs(rt.F32)},
			{"elementwise/binary", "elementwise.cl", typeDefs(rt.F32) + " -DONE_KERNEL -DKERNEL_binary"},
			{"reduce/all", "reduce.cl", typeDefs(rt.F32)},
			{"reduce/reduce_wg", "reduce.cl", typeDefs(rt.F32) + " -DONE_KERNEL -DKERNEL_reduce_wg"},
		}
		for _, c := range cases {
			b.Run(fmt.Sprintf("dev%d/%s", info.Index, c.name), func(b *testing.B) {
				opts := strings.TrimSpace(c.defines + " " + d.opts)
				// A comment unique to each build defeats the drivers'
				// caches keyed by source.
				for i := 0; i < b.N; i++ {
					src := kernelSource(c.file) + fmt.Sprintf("\n// build %d %p\n", i, b)
					p, err := buildSource(d.ctx, d.ent.dev, src, opts)
					if err != nil {
						b.Fatal(err)
					}
					releaseProgram(p)
				}
			})
		}
		d.Close()
	}
}
