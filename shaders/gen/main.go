package main

import (
	"bytes"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
)

// dtype mirrors rt.DType (ids must match rt/dtype.go).
type dtype struct {
	name string
	id   int
	size int
	glsl string // storage type
	ct   string // compute type
	ld   string // storage -> compute, %s is the value
	st   string // compute -> storage
}

var dtypes = []dtype{
	{"f32", 1, 4, "float", "float", "(%s)", "(%s)"},
	{"f16", 2, 2, "float16_t", "float", "float(%s)", "float16_t(%s)"},
	{"f64", 3, 8, "double", "double", "(%s)", "(%s)"},
	{"i32", 4, 4, "int", "int", "(%s)", "(%s)"},
	{"i64", 5, 8, "int64_t", "int64_t", "(%s)", "(%s)"},
	{"u8", 6, 1, "uint8_t", "int", "int(%s)", "uint8_t(%s)"},
	{"bool", 7, 1, "uint8_t", "int", "int(%s)", "uint8_t((%s) != 0 ? 1 : 0)"},
	{"i8", 8, 1, "int8_t", "int", "int(%s)", "int8_t(%s)"},
}

func dt(name string) dtype {
	for _, d := range dtypes {
		if d.name == name {
			return d
		}
	}
	panic(name)
}

type variant struct {
	name string
	src  string
	defs []string
}

// needs returns the extension defines for a set of dtypes.
func needs(ds ...dtype) []string {
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, d := range ds {
		switch d.name {
		case "f16":
			add("NEED_16BIT=1")
		case "u8", "bool", "i8":
			add("NEED_8BIT=1")
		case "i64":
			add("NEED_I64=1")
		}
	}
	return out
}

func slot(s string, d dtype) []string {
	return []string{fmt.Sprintf("%s_DT=%d", s, d.id)}
}

// floatCT: compute defines for float kernels.
func floatCT(d dtype) []string {
	if d.name == "f64" {
		return []string{"CT_DOUBLE=1"}
	}
	return nil
}

// gemmTiles are the matmul.comp configurations; rt/vulkan's gemmTiles
// mirrors this table (names and geometry).
// padA tiles are built with PADA: unswizzled shared-memory stages with
// A's rows padded (matmul.comp; faster for "l" on an H200, slower for
// "w"); rt/vulkan's gemmTile.padA.
type tile struct {
	name               string
	bm, bn, bk, tm, tn int
	padA               bool
}

var gemmTiles = []tile{
	{"l", 128, 128, 16, 8, 8, true}, // 256 invocations
	{"m", 128, 64, 16, 8, 4, false}, // 256
	{"s", 64, 64, 16, 8, 4, false},  // 128
	{"t", 32, 32, 16, 4, 4, false},  // 64
	// Alternatives that only run when forced (the tile sweep of
	// BenchmarkGEMMTiles; f32 and f16 only).
	{"l8", 128, 128, 8, 8, 8, false}, // 256
	{"w", 64, 128, 16, 8, 4, false},  // 256
	{"n", 128, 32, 32, 4, 4, false},  // 256
	{"u", 64, 32, 16, 4, 4, false},   // 128
	{"v", 32, 128, 32, 4, 4, false},  // 256
}

// convTiles are the convgemm.comp configurations (rt/vulkan's convTiles):
// matmul.comp's plus "w", a wide 64x128 tile for few output channels and
// many pixels.
var convTiles = []tile{
	{"l", 128, 128, 16, 8, 8, false},
	{"w", 64, 128, 16, 8, 4, false}, // 256 invocations
	{"m", 128, 64, 16, 8, 4, false},
	{"s", 64, 64, 16, 8, 4, false},
	{"t", 32, 32, 16, 4, 4, false},
	// Narrow tiles for few output pixels (batch-1 layers at 7x7 to
	// 14x14): 256 and 128 invocations of 4x4 over 32 columns.
	{"n", 128, 32, 16, 4, 4, false},
	{"u", 64, 32, 16, 4, 4, false},
}

func variants() []variant {
	var vs []variant
	add := func(name, src string, defs ...[]string) {
		var all []string
		for _, d := range defs {
			all = append(all, d...)
		}
		vs = append(vs, variant{name, src, all})
	}
	sizes := map[int]string{1: "b1", 2: "b2", 4: "b4", 8: "b8"}
	for _, sz := range []int{1, 2, 4, 8} {
		def := []string{fmt.Sprintf("ESIZE=%d", sz)}
		if sz == 1 {
			def = append(def, "NEED_8BIT=1")
		}
		if sz == 2 {
			def = append(def, "NEED_16BIT=1")
		}
		add("fill_"+sizes[sz], "fill.comp", def)
		add("copy_"+sizes[sz], "copy.comp", def)
		if sz <= 4 { // rt/vulkan's vecCopy
			add("copyv_"+sizes[sz], "copy.comp", def, []string{"VEC=1"})
			add("fillv_"+sizes[sz], "fill.comp", def, []string{"VEC=1"})
		}
		add("where_"+sizes[sz], "where.comp", def)
		add("gather_"+sizes[sz], "gather.comp", def)
		add("gatherel_"+sizes[sz], "gatherel.comp", def)
	}
	for _, x := range dtypes {
		for _, y := range dtypes {
			if x.name != y.name {
				add("cast_"+x.name+"_"+y.name, "cast.comp", slot("X", x), slot("Y", y), needs(x, y))
			}
		}
	}
	// 4-item vector variants of the contiguous elementwise kernels
	// (vec.glsl; rt/vulkan's vecDTypes)
	for _, xn := range []string{"f32", "f16", "i32"} {
		x := dt(xn)
		add("unaryv_"+xn, "unary.comp", slot("X", x), slot("Y", x), needs(x), []string{"VEC=1"})
		add("binaryv_"+xn, "binary.comp", slot("X", x), slot("Y", x), needs(x), []string{"VEC=1"})
		for _, yn := range []string{"f32", "f16", "i32"} {
			if yn != xn {
				y := dt(yn)
				add("castv_"+xn+"_"+yn, "cast.comp", slot("X", x), slot("Y", y), needs(x, y), []string{"VEC=1"})
			}
		}
	}
	for _, x := range dtypes {
		add("unary_"+x.name, "unary.comp", slot("X", x), slot("Y", x), needs(x), floatCT(x))
		add("binary_"+x.name, "binary.comp", slot("X", x), slot("Y", x), needs(x), floatCT(x))
		add("cmp_"+x.name, "binary.comp", slot("X", x), slot("Y", dt("bool")), needs(x, dt("bool")), floatCT(x), []string{"CMP=1"})
	}
	for _, n := range []string{"f32", "f16", "f64"} {
		x := dt(n)
		base := [][]string{slot("X", x), slot("Y", x), needs(x), floatCT(x)}
		add("reduce_"+n, "reduce.comp", base...)
		add("argreduce_"+n, "reduce.comp", append(base, []string{"ARG=1"})...)
		add("softmax_"+n, "softmax.comp", base...)
		add("normalize_"+n, "normalize.comp", base...)
		if n != "f64" {
			add("softmaxsg_"+n, "softmax.comp", append(base, []string{"SUBGROUP=1"})...)
			add("normalizesg_"+n, "normalize.comp", append(base, []string{"SUBGROUP=1"})...)
			// vector rows (vrows.glsl; rt/vulkan's vrowLanes)
			add("reducev_"+n, "reduce.comp", append(base, []string{"VROWS=1"})...)
			add("softmaxv_"+n, "softmax.comp", append(base, []string{"SUBGROUP=1", "VROWS=1"})...)
			add("normalizev_"+n, "normalize.comp", append(base, []string{"SUBGROUP=1", "VROWS=1"})...)
		}
		add("gemv_"+n, "gemv.comp", base...)
		add("gemvsg_"+n, "gemv.comp", append(base, []string{"SUBGROUP=1"})...)
		for _, t := range gemmTiles {
			if n == "f64" && t.bm*t.bn > 64*64 {
				continue // needs more than 32 KiB of shared memory in f64
			}
			add("matmul_"+n+"_"+t.name, "matmul.comp", append(base, t.defs())...)
			add("matmulk_"+n+"_"+t.name, "matmul.comp", append(base, t.defs(), []string{"SPLITK=1"})...)
		}
		add("splitk_"+n, "splitk.comp", base...)
		add("conv_"+n, "conv.comp", base...)
		add("dwconv_"+n, "dwconv.comp", base...)
		for _, t := range convTiles {
			if n == "f64" && t.bm*t.bn > 64*64 {
				continue
			}
			add("convgemm_"+n+"_"+t.name, "convgemm.comp", append(base, t.defs())...)
			add("convgemmk_"+n+"_"+t.name, "convgemm.comp", append(base, t.defs(), []string{"SPLITK=1"})...)
			if n != "f64" { // rt.SepConv
				add("convgemmsep_"+n+"_"+t.name, "convgemm.comp", append(base, t.defs(), []string{"SEPDW=1"})...)
				add("convgemmksep_"+n+"_"+t.name, "convgemm.comp", append(base, t.defs(), []string{"SPLITK=1", "SEPDW=1"})...)
			}
		}
		if n == "f32" { // Winograd F(4,3) transforms (rt/vulkan's winoConv)
			for _, s := range []string{"W", "X", "Y"} {
				add("wino"+strings.ToLower(s)+"_"+n, "wino.comp", append(base, []string{"WINO_" + s + "=1"})...)
			}
		}
		add("convt_"+n, "convt.comp", base...)
		add("pool_"+n, "pool.comp", base...)
		if n != "f64" { // rt/vulkan's poolVec
			add("poolv_"+n, "pool.comp", append(base, []string{"VEC=1"})...)
		}
	}
	// f16 weights with f32 activations (rt.HalfWeights): the weight
	// operand (matmul's and gemv's B, the convolutions' W) in slot W.
	{
		x, w := dt("f32"), dt("f16")
		base := [][]string{slot("X", x), slot("Y", x), slot("W", w), needs(x, w)}
		n := "f32w16"
		add("gemv_"+n, "gemv.comp", base...)
		add("gemvsg_"+n, "gemv.comp", append(base, []string{"SUBGROUP=1"})...)
		for _, t := range gemmTiles {
			add("matmul_"+n+"_"+t.name, "matmul.comp", append(base, t.defs())...)
			add("matmulk_"+n+"_"+t.name, "matmul.comp", append(base, t.defs(), []string{"SPLITK=1"})...)
		}
		add("conv_"+n, "conv.comp", base...)
		add("dwconv_"+n, "dwconv.comp", base...)
		add("winow_"+n, "wino.comp", append(base, []string{"WINO_W=1"})...)
		for _, t := range convTiles {
			add("convgemm_"+n+"_"+t.name, "convgemm.comp", append(base, t.defs())...)
			add("convgemmk_"+n+"_"+t.name, "convgemm.comp", append(base, t.defs(), []string{"SPLITK=1"})...)
		}
	}
	for _, n := range []string{"f32", "f16"} { // rt.Attention: f32 compute
		x := dt(n)
		for _, dmax := range []int{64, 128} {
			add(fmt.Sprintf("attention_%s_d%d", n, dmax), "attention.comp", slot("X", x), slot("Y", x), needs(x), floatCT(x),
				[]string{fmt.Sprintf("DMAX=%du", dmax)})
		}
		add("attention_"+n+"_t64", "attention.comp", slot("X", x), slot("Y", x), needs(x), floatCT(x), []string{"DMAX=64u", "TILED=1"})
	}
	for _, n := range []string{"f32", "f64"} { // rt.OptimStep: no f16
		x := dt(n)
		add("optim_"+n, "optim.comp", slot("X", x), slot("Y", x), needs(x), floatCT(x))
	}
	for _, x := range dtypes {
		add("scatter_"+x.name, "scatter.comp", slot("X", x), slot("Y", x), needs(x))
	}
	for _, n := range []string{"f32", "f16", "f64", "i32", "i64"} {
		x := dt(n)
		add("topk_"+n, "topk.comp", slot("X", x), slot("Y", x), needs(x))
	}
	// f16 GEMM on subgroup-scope cooperative matrices, per shape
	for _, sh := range coopShapes {
		f16 := dt("f16")
		for _, blk := range []struct{ bn, bk int }{{128, 32}, {256, 32}, {128, 64}} { // rt/vulkan's coopBlocks
			name := fmt.Sprintf("mmcm_f16_%s_%d", sh, blk.bn)
			if blk.bk != 32 {
				name += fmt.Sprintf("k%d", blk.bk)
			}
			add(name, "mmcm.comp", slot("X", f16), slot("Y", f16), needs(f16), sh.defs(),
				[]string{fmt.Sprintf("BN=%d", blk.bn), fmt.Sprintf("BKN=%d", blk.bk)})
		}
	}
	// Convolutions with f16 weights on subgroup-scope cooperative
	// matrices, per shape (rt/vulkan's coopConv)
	for _, sh := range coopShapes {
		x, w := dt("f32"), dt("f16")
		shape := sh.String()
		base := [][]string{slot("X", x), slot("Y", x), slot("W", w), needs(x, w), sh.defs()}
		add("convcm_f32w16_"+shape, "convcm.comp", base...)
		add("convcmk_f32w16_"+shape, "convcm.comp", append(base, []string{"SPLITK=1"})...)
	}
	// f16 GEMM on workgroup-scope cooperative matrices (NV2; compiled by
	// glslang 15), per block and operand transposition (rt/vulkan's
	// coop2Blocks).
	for _, blk := range coop2Blocks {
		f16 := dt("f16")
		for _, tr := range []string{"nn", "tn", "nt", "tt"} {
			ta, tb := 0, 0
			if tr[0] == 't' {
				ta = 1
			}
			if tr[1] == 't' {
				tb = 1
			}
			blkName := fmt.Sprintf("%dx%dk%d", blk.bm, blk.bn, blk.bk)
			if blk.unroll != 4 {
				blkName += fmt.Sprintf("u%d", blk.unroll)
			}
			add("mmcm2_f16_"+blkName+"_"+tr, "mmcm2.comp", slot("X", f16), slot("Y", f16), needs(f16),
				[]string{fmt.Sprintf("BM=%d", blk.bm), fmt.Sprintf("BN=%d", blk.bn), fmt.Sprintf("BK=%d", blk.bk),
					fmt.Sprintf("LOCAL_SIZE=%d", blk.wg), fmt.Sprintf("UNROLL=%d", blk.unroll),
					fmt.Sprintf("TA=%d", ta), fmt.Sprintf("TB=%d", tb)})
		}
	}
	for _, n := range []string{"i32", "i64"} {
		x := dt(n)
		base := [][]string{slot("X", x), slot("Y", x), needs(x)}
		add("reduce_"+n, "reduce.comp", base...)
	}
	return vs
}

// coopShape is a subgroup-scope cooperative-matrix MxNxK shape of
// GL_NV_cooperative_matrix or (khr) GL_KHR_cooperative_matrix, for
// subgroups of sgs invocations (rt/vulkan's coopShape).
type coopShape struct {
	m, n, k int
	khr     bool
	sgs     int
}

// String is the shape's part of a variant name: MxNxK, khrMxNxK.
func (s coopShape) String() string {
	p := ""
	if s.khr {
		p = "khr"
	}
	return fmt.Sprintf("%s%dx%dx%d", p, s.m, s.n, s.k)
}

// defs are the shape's defines (coopmat.glsl).
func (s coopShape) defs() []string {
	d := []string{fmt.Sprintf("MS=%d", s.m), fmt.Sprintf("NS=%d", s.n), fmt.Sprintf("KS=%d", s.k)}
	if s.khr {
		d = append(d, "KHR=1")
	}
	if s.sgs != 32 {
		d = append(d, fmt.Sprintf("SGS=%d", s.sgs))
	}
	return d
}

// coopShapes are the shapes that mmcm.comp and convcm.comp are compiled
// for (rt/vulkan's coopShapes): NV's on NVIDIA GPUs; KHR's 16x16x16 for
// 32-wide subgroups, and 8x8x8 for lavapipe's 8-wide ones (Mesa 26's
// lavapipe lists it; CI runs the kernels' tests there).
var coopShapes = []coopShape{{16, 16, 16, false, 32}, {16, 8, 16, false, 32}, {16, 16, 16, true, 32}, {8, 8, 8, true, 8}}

// coop2Blocks are mmcm2.comp's workgroup blocks: BM x BN outputs, K in
// slices of BK, wg invocations, the aligned K loop unrolled unroll times
// (rt/vulkan's coop2Blocks; its coop2Rule picks 128x128k64u1 or 64x64k64,
// the others are for BenchmarkGEMMCoop2's sweep).
var coop2Blocks = []struct{ bm, bn, bk, wg, unroll int }{
	{128, 256, 64, 256, 4}, {128, 128, 64, 256, 4}, {64, 64, 64, 128, 4},
	{128, 256, 32, 256, 4}, {256, 128, 64, 256, 4}, {128, 128, 32, 256, 4},
	{128, 256, 64, 256, 1}, {128, 128, 64, 256, 1},
}

func (t tile) defs() []string {
	d := []string{fmt.Sprintf("BM=%d", t.bm), fmt.Sprintf("BN=%d", t.bn), fmt.Sprintf("BK=%d", t.bk), fmt.Sprintf("TM=%d", t.tm), fmt.Sprintf("TN=%d", t.tn)}
	if t.padA {
		d = append(d, "PADA=1")
	}
	return d
}

func typesHeader() string {
	var b strings.Builder
	b.WriteString("// Code generated by shaders/gen; DO NOT EDIT.\n\n")
	b.WriteString("// Per-slot dtype macros. A kernel sets <S>_DT to an rt.DType id and gets\n")
	b.WriteString("// <S>_T (storage type), <S>_CT (compute type), <S>_LD(e) (storage to\n")
	b.WriteString("// compute), <S>_ST(v) (compute to storage), <S>_ISFLOAT, <S>_ISBOOL.\n// Slot W is the weight operand of f16-weight kernels (common.glsl).\n")
	for _, s := range []string{"X", "Y", "W"} {
		for _, d := range dtypes {
			fmt.Fprintf(&b, "\n#if defined(%s_DT) && %s_DT == %d // %s\n", s, s, d.id, d.name)
			fmt.Fprintf(&b, "#define %s_T %s\n#define %s_CT %s\n", s, d.glsl, s, d.ct)
			fmt.Fprintf(&b, "#define %s_LD(e) %s\n#define %s_ST(v) %s\n", s, fmt.Sprintf(d.ld, "e"), s, fmt.Sprintf(d.st, "v"))
			isf := 0
			if d.id == 1 || d.id == 2 || d.id == 3 {
				isf = 1
			}
			isb := 0
			if d.name == "bool" {
				isb = 1
			}
			fmt.Fprintf(&b, "#define %s_ISFLOAT %d\n#define %s_ISBOOL %d\n#define %s_SIZE %d\n#endif\n", s, isf, s, isb, s, d.size)
		}
	}
	return b.String()
}

// glslang15Exts are the extensions whose sources need glslang 15: Debian
// 12's glslc (shaderc 2023.2, glslang 12) compiles GL_NV_cooperative_matrix
// only. A source that enables one of them outside any #if is compiled by
// glslang15 for Vulkan 1.3 (SPIR-V 1.6), and a variant defining KHR=1
// (coopmat.glsl: mmcm.comp and convcm.comp enable
// GL_KHR_cooperative_matrix under #ifdef KHR) by glslang15 for Vulkan 1.2
// (SPIR-V 1.5: a pipeline from SPIR-V 1.6 may run with any subgroup size
// the driver picks, one from 1.5 runs with the device's subgroupSize,
// which the variants' layout assumes); every other one by glslc for
// Vulkan 1.2.
var glslang15Exts = []string{"GL_KHR_cooperative_matrix", "GL_NV_cooperative_matrix2"}

// needsGlslang15 reports whether the source src enables one of
// glslang15Exts outside any conditional block.
func needsGlslang15(src string) (bool, error) {
	b, err := os.ReadFile(src)
	if err != nil {
		return false, err
	}
	depth := 0
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "#if", "#ifdef", "#ifndef":
			depth++
		case "#endif":
			depth--
		}
		if len(f) >= 2 && f[0] == "#extension" && depth == 0 {
			for _, e := range glslang15Exts {
				if f[1] == e {
					return true, nil
				}
			}
		}
	}
	return false, nil
}

// glslang15Cmd returns the command that runs glslangValidator 15:
// $GLSLANG15 (a glslangValidator 15 binary) when set, else the vendored
// gen/glslang15.sh, which fetches Debian 13's glslang-tools into a cache
// folder on first use. It runs it once (--version), so that the fetch
// happens before the parallel compiles, and checks the version: another
// glslang would write different SPIR-V than the committed blobs.
func glslang15Cmd() ([]string, error) {
	cmd := []string{"bash", filepath.Join("gen", "glslang15.sh")}
	if p := os.Getenv("GLSLANG15"); p != "" {
		cmd = []string{p}
	}
	c := exec.Command(cmd[0], append(cmd[1:], "--version")...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %v\n%s", strings.Join(cmd, " "), err, stderr.String())
	}
	if !regexp.MustCompile(`(?m)^Glslang Version: [0-9]+:15\.`).Match(out) {
		return nil, fmt.Errorf("%s is not glslang 15:\n%s", strings.Join(cmd, " "), out)
	}
	return cmd, nil
}

func main() {
	glslc := os.Getenv("GLSLC")
	if glslc == "" {
		glslc = "glslc"
	}
	if err := os.WriteFile("gen_types.glsl", []byte(typesHeader()), 0o644); err != nil {
		fatal(err)
	}
	tmpl, err := os.ReadFile("act.glsl.tmpl")
	if err != nil {
		fatal(err)
	}
	lit := regexp.MustCompile(`K\(([-0-9.e]+)\)`)
	for suf, rep := range map[string]string{"f": "${1}", "d": "${1}LF"} {
		out := "// Code generated by shaders/gen from act.glsl.tmpl; DO NOT EDIT.\n\n" + lit.ReplaceAllString(string(tmpl), rep)
		if err := os.WriteFile("gen_act_"+suf+".glsl", []byte(out), 0o644); err != nil {
			fatal(err)
		}
	}
	if err := os.MkdirAll("spv", 0o755); err != nil {
		fatal(err)
	}
	vs := variants()
	sort.Slice(vs, func(i, j int) bool { return vs[i].name < vs[j].name })
	srcNeeds := map[string]bool{}
	g15 := map[string]bool{} // by variant
	for _, v := range vs {
		need, seen := srcNeeds[v.src]
		if !seen {
			if need, err = needsGlslang15(v.src); err != nil {
				fatal(err)
			}
			srcNeeds[v.src] = need
		}
		g15[v.name] = need || slices.Contains(v.defs, "KHR=1")
	}
	var glslang15 []string
	for _, need := range g15 {
		if need && glslang15 == nil {
			if glslang15, err = glslang15Cmd(); err != nil {
				fatal(err)
			}
		}
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []string
		sem  = make(chan struct{}, runtime.NumCPU())
	)
	for _, v := range vs {
		wg.Add(1)
		go func(v variant) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			args := []string{"-fshader-stage=compute", "--target-env=vulkan1.2", "-O", "-I", "."}
			if g15[v.name] {
				env := "vulkan1.3"
				if !srcNeeds[v.src] {
					env = "vulkan1.2" // a KHR=1 variant
				}
				args = []string{"-V", "--target-env", env, "-S", "comp", "-I."}
			}
			for _, d := range v.defs {
				args = append(args, "-D"+d)
			}
			out := filepath.Join("spv", v.name+".spv")
			args = append(args, "-o", out, v.src)
			cmd := exec.Command(glslc, args...)
			if g15[v.name] {
				cmd = exec.Command(glslang15[0], append(glslang15[1:], args...)...)
			}
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stderr, &stderr // glslangValidator reports errors on stdout
			if err := cmd.Run(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("%s: %v\n%s", v.name, err, stderr.String()))
				mu.Unlock()
			}
		}(v)
	}
	wg.Wait()
	if len(errs) > 0 {
		sort.Strings(errs)
		fatal(fmt.Errorf("shader compiler failed:\n%s", strings.Join(errs, "\n")))
	}
	want := map[string]bool{}
	for _, v := range vs {
		want[v.name+".spv"] = true
	}
	ents, _ := os.ReadDir("spv")
	for _, e := range ents {
		if !want[e.Name()] {
			os.Remove(filepath.Join("spv", e.Name()))
		}
	}
	var b strings.Builder
	b.WriteString("// Code generated by shaders/gen; DO NOT EDIT.\n\npackage shaders\n\nimport \"embed\"\n\n")
	b.WriteString("//go:embed spv/*.spv\nvar spvFS embed.FS\n\n")
	b.WriteString("// names lists every compiled variant, sorted.\nvar names = []string{\n")
	for _, v := range vs {
		fmt.Fprintf(&b, "\t%q, // %s %s\n", v.name, v.src, strings.Join(v.defs, " "))
	}
	b.WriteString("}\n")
	src, err := format.Source([]byte(b.String()))
	if err != nil {
		fatal(err)
	}
	if err := os.WriteFile("shaders_gen.go", src, 0o644); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "shaders/gen:", err)
	os.Exit(1)
}
