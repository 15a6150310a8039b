package cpu

import (
	"os"
	"strconv"
)

// VRUN_CPU_NPMAXN overrides npMaxN in benchmarks, to compare the no-pack
// and packed GEMM drivers side by side; VRUN_CPU_DCWU forces the wide
// direct-convolution kernels' vectors per block (2 or 4), and VRUN_CPU_DCW=0
// turns them off (convolutions with many channels then run as GEMMs),
// VRUN_CPU_DCWGAP=0 their compressed stores (flat ranges then go through
// scratch);
// VRUN_CPU_WINO=1 or -1 forces Winograd F(4,3) on or off where it applies;
// VRUN_CPU_OCW=1 or -1 forces the channels-in-lanes kernels on or off;
// VRUN_CPU_MP33=0 turns the 3×3 stride-2 max-pooling kernel off;
// VRUN_CPU_DW3FLAT sets the widest plane of the flat depthwise kernel
// (dw3FlatMaxW; 0: none); VRUN_CPU_DCWBAND=-1 turns directConv's bands
// off, k > 0 forces k bands a worker (dcwBands); VRUN_CPU_LEVEL caps the kernel level
// (maxKernelLevel: 0 Go, 1 AVX2, 2 AVX-512), to time the AVX2 kernels on an
// AVX-512 machine.
func init() {
	if v, err := strconv.Atoi(os.Getenv("VRUN_CPU_LEVEL")); err == nil {
		maxKernelLevel, useAsm = v, v > levelGo
	}
	if v, err := strconv.Atoi(os.Getenv("VRUN_CPU_NPMAXN")); err == nil {
		npMaxN = v
	}
	if v, err := strconv.Atoi(os.Getenv("VRUN_CPU_DCWU")); err == nil {
		dcwU = v
	}
	if v, err := strconv.Atoi(os.Getenv("VRUN_CPU_DCW")); err == nil {
		dcwOn = v != 0
	}
	if v, err := strconv.Atoi(os.Getenv("VRUN_CPU_DCWGAP")); err == nil {
		dcwGap = v != 0
	}
	if v, err := strconv.Atoi(os.Getenv("VRUN_CPU_DCWTC")); err == nil {
		dcwTapChunk = v
	}
	if v, err := strconv.Atoi(os.Getenv("VRUN_CPU_DCWALL")); err == nil {
		dcwAll = v != 0
	}
	if v, err := strconv.Atoi(os.Getenv("VRUN_CPU_WINO")); err == nil {
		winoMode = v
	}
	if v, err := strconv.Atoi(os.Getenv("VRUN_CPU_MP33")); err == nil {
		mp33On = v != 0
	}
	if v, err := strconv.Atoi(os.Getenv("VRUN_CPU_OCW")); err == nil {
		ocwMode = v
	}
	if v, err := strconv.Atoi(os.Getenv("VRUN_CPU_DCWPW")); err == nil {
		dcwPointwise = v != 0
	}
	if v, err := strconv.Atoi(os.Getenv("VRUN_CPU_DCWBAND")); err == nil {
		dcwBands = v
	}
	if v, err := strconv.Atoi(os.Getenv("VRUN_CPU_DW3FLAT")); err == nil {
		dw3FlatMaxW = v
	}
}
