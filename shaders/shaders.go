package shaders

import "sort"

// SPIRV returns the SPIR-V blob of the named variant ("unary_f32").
func SPIRV(name string) ([]byte, bool) {
	b, err := spvFS.ReadFile("spv/" + name + ".spv")
	if err != nil {
		return nil, false
	}
	return b, true
}

// Names returns the names of all compiled variants, sorted.
func Names() []string {
	out := append([]string(nil), names...)
	sort.Strings(out)
	return out
}
