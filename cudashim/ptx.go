package cudashim

import (
	_ "embed"
	"regexp"
	"strings"
)

// embeddedPTX is the kernels' PTX, built by kernels/build.sh.
//
//go:embed kernels/kernels.ptx
var embeddedPTX string

// embeddedIndexedPTX is the PTX of kernels/indexed.cu (GatherElements,
// ScatterElements, TopK), a second module built by kernels/build.sh.
//
//go:embed kernels/indexed.ptx
var embeddedIndexedPTX string

// embeddedOptimPTX is the PTX of kernels/optim.cu (OptimStep), a third
// module built by kernels/build.sh.
//
//go:embed kernels/optim.ptx
var embeddedOptimPTX string

// placeholderPrefix starts the placeholder kernels.ptx, indexed.ptx or
// optim.ptx that build.sh --placeholder (or --indexed-placeholder,
// --optim-placeholder) writes where nvcc is not available.
const placeholderPrefix = "// vrun placeholder"

// PTXIsPlaceholder reports whether the embedded PTX is the placeholder
// rather than real kernels; the backend then refuses to open devices.
func PTXIsPlaceholder() bool { return strings.HasPrefix(embeddedPTX, placeholderPrefix) }

// IndexedPTXIsPlaceholder reports whether the embedded indexed.ptx is the
// placeholder; devices then open, but report GatherElements,
// ScatterElements and TopK as unsupported.
func IndexedPTXIsPlaceholder() bool { return strings.HasPrefix(embeddedIndexedPTX, placeholderPrefix) }

// OptimPTXIsPlaceholder reports whether the embedded optim.ptx is the
// placeholder; devices then open, but report OptimStep as unsupported.
func OptimPTXIsPlaceholder() bool { return strings.HasPrefix(embeddedOptimPTX, placeholderPrefix) }

var ptxVersionRE = regexp.MustCompile(`(?m)^\.version\s+(\S+)`)
var ptxTargetRE = regexp.MustCompile(`(?m)^\.target\s+(\S+)`)

// PTXVersion returns the PTX ISA version (".version 9.0" -> "9.0") and
// target ("sm_75") declared by ptx, or "" when absent.
func PTXVersion(ptx string) (version, target string) {
	if m := ptxVersionRE.FindStringSubmatch(ptx); m != nil {
		version = m[1]
	}
	if m := ptxTargetRE.FindStringSubmatch(ptx); m != nil {
		target = strings.TrimSuffix(m[1], ",")
	}
	return version, target
}

// kernelEntryNames are the PTX entry points the backend uses.
var kernelEntryNames = []string{
	"ew_copy", "ew_cast", "ew_unary_f", "ew_unary_d", "ew_unary_i", "ew_binary_f", "ew_binary_d",
	"ew_binary_i", "ew_where", "ew_fill",
	"reduce_rows_h", "reduce_rows_f", "reduce_rows_d", "reduce_cols_h", "reduce_cols_f", "reduce_cols_d",
	"reduce_int",
	"softmax_rows_h", "softmax_rows_f", "softmax_rows_d", "softmax_cols_h", "softmax_cols_f", "softmax_cols_d",
	"normalize_h", "normalize_f", "normalize_d",
	"gemm_h", "gemm_f", "gemm_d", "conv_h", "conv_f", "conv_d", "convt_h", "convt_f", "convt_d",
	"pool_h", "pool_f", "pool_d", "gather",
}

// indexedEntryNames are the entry points of indexed.ptx.
var indexedEntryNames = []string{"gather_elements", "scatter_elements", "topk"}

// optimEntryNames are the entry points of optim.ptx.
var optimEntryNames = []string{"optim_f", "optim_d"}
