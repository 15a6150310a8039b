//go:build amd64 && !purego

package cpu

// The AVX2 + FMA direct-convolution kernels (dconvA*, dcwA*: 8-lane
// vectors, 16 registers), which dconvRun and dcwRunHi take below
// levelAVX512, are generated with the AVX-512 ones by dconv_amd64_gen.py.

//go:generate sh -c "/usr/bin/python3 dconv_amd64_gen.py -avx2 > dconv_avx2_amd64.s && /usr/bin/python3 dconv_amd64_gen.py -avx2decl | gofmt > dconvavx2decl_gen.go"
