// kernels.cu: the single translation unit that build.sh compiles to
// kernels.ptx. Each part is an ordinary .cu file included here so the
// whole backend is one PTX module.
#include "ew.cu"
#include "reduce.cu"
#include "nn.cu"
#include "convsk.cu"
#include "attention.cu"
