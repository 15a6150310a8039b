package cudashim

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"os"
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

// embeddedFatbin is kernels.ptx's module compiled to SASS for sm_80 and
// sm_90 (a compressed fatbin built by kernels/build.sh from the same
// sources); empty while it is a placeholder.
//
//go:embed kernels/kernels.fatbin
var embeddedFatbin []byte

// embeddedIndexedFatbin is indexed.ptx's module as SASS for sm_80 and
// sm_90; empty while it is a placeholder.
//
//go:embed kernels/indexed.fatbin
var embeddedIndexedFatbin []byte

// embeddedOptimFatbin is optim.ptx's module as SASS for sm_80 and sm_90;
// empty while it is a placeholder.
//
//go:embed kernels/optim.fatbin
var embeddedOptimFatbin []byte

// fatbinEnv is the environment variable that, set to 0, makes devices
// ignore the embedded fatbins and JIT-compile the PTX (testing the
// fallback, or measuring the JIT).
const fatbinEnv = "VRUN_CUDA_FATBIN"

// useFatbin reports whether devices load the embedded fatbins (unless
// VRUN_CUDA_FATBIN=0).
func useFatbin() bool { return os.Getenv(fatbinEnv) != "0" }

// fatbinMagic starts a fatbin (the header's first little-endian word).
const fatbinMagic = 0xBA55ED50

// Fatbin entry kinds.
const (
	fatbinKindPTX  = 1
	fatbinKindSASS = 2 // an ELF cubin
)

// FatbinArchs lists the entries of a fatbin: the SM versions of its SASS
// (cubin) entries and of its PTX entries, in file order (80 for sm_80).
// The format: a 16-byte header (magic 0xBA55ED50, u16 version, u16 header
// size, u64 size of the entries), then entries, each a header (u16 kind:
// 1 PTX, 2 cubin; u16 version; u32 header size; u64 payload size; the SM
// version as the u32 at offset 28) followed by its payload.
func FatbinArchs(fb []byte) (sass, ptx []int, err error) {
	le := binary.LittleEndian
	if len(fb) < 16 || le.Uint32(fb) != fatbinMagic {
		return nil, nil, fmt.Errorf("cudashim: not a fatbin (%d bytes)", len(fb))
	}
	hs := int(le.Uint16(fb[6:]))
	size := le.Uint64(fb[8:])
	if hs < 16 || uint64(hs)+size > uint64(len(fb)) {
		return nil, nil, fmt.Errorf("cudashim: fatbin header claims %d+%d bytes of %d", hs, size, len(fb))
	}
	end := hs + int(size)
	for off := hs; off < end; {
		if end-off < 32 {
			return nil, nil, fmt.Errorf("cudashim: fatbin entry at %d truncated", off)
		}
		kind := le.Uint16(fb[off:])
		ehs := uint64(le.Uint32(fb[off+4:]))
		psize := le.Uint64(fb[off+8:])
		arch := int(le.Uint32(fb[off+28:]))
		if ehs < 32 || ehs+psize > uint64(end-off) {
			return nil, nil, fmt.Errorf("cudashim: fatbin entry at %d claims %d+%d bytes of %d", off, ehs, psize, end-off)
		}
		switch kind {
		case fatbinKindSASS:
			sass = append(sass, arch)
		case fatbinKindPTX:
			ptx = append(ptx, arch)
		}
		off += int(ehs + psize)
	}
	return sass, ptx, nil
}

// sassFor returns the SASS architecture among sass that runs on a GPU of
// compute capability cc (86 for 8.6), or 0 if none does: cubins run on
// GPUs of the same major version and an equal or higher minor one, and
// the driver picks the newest such.
func sassFor(sass []int, cc int) int {
	best := 0
	for _, a := range sass {
		if a/10 == cc/10 && a <= cc && a > best {
			best = a
		}
	}
	return best
}

// archList formats SM versions: [80 90] -> "sm_80, sm_90".
func archList(archs []int) string {
	s := make([]string, len(archs))
	for i, a := range archs {
		s[i] = fmt.Sprintf("sm_%d", a)
	}
	return strings.Join(s, ", ")
}

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
	"attention_h64", "attention_f64", "attention_h128", "attention_f128", "attention_ht", "attention_ft",
	"convsk_h_n", "convsk_h_u", "convsk_f_n", "convsk_f_u", "convsk_d_n", "convsk_d_u",
	"convskr_h", "convskr_f", "convskr_d",
	"dwconv_h", "dwconv_f", "dwconv_d",
}

// indexedEntryNames are the entry points of indexed.ptx.
var indexedEntryNames = []string{"gather_elements", "scatter_elements", "topk"}

// optimEntryNames are the entry points of optim.ptx.
var optimEntryNames = []string{"optim_f", "optim_d"}
