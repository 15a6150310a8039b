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

// placeholderPrefix starts the placeholder kernels.ptx that build.sh
// --placeholder writes where nvcc is not available.
const placeholderPrefix = "// vrun placeholder"

// PTXIsPlaceholder reports whether the embedded PTX is the placeholder
// rather than real kernels; the backend then refuses to open devices.
func PTXIsPlaceholder() bool { return strings.HasPrefix(embeddedPTX, placeholderPrefix) }

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
