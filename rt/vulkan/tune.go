//go:build cgo

package vulkan

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/x448/float16"

	"github.com/vrun-go/vrun/internal/atomicfile"
	"github.com/vrun-go/vrun/rt"
	"github.com/vrun-go/vrun/shaders"
)

// The GEMM autotuner. The tile, K split and load path of a tiled GEMM
// (MatMul on matmul.comp, Conv on convgemm.comp), whether a 3x3
// convolution takes the Winograd kernels, and the geometry of a GEMV
// (gemv.comp) come from fixed rules (pickTile, pickConvTile, pickSplitK,
// winoPick, gemvGeometry), measured on an H100 and H200. With
// VRUN_VK_TUNE=1 a device instead times the candidates of each such
// shape it lowers (every tile that fits, K splits of 1 to 16 slices, for
// matmul.comp the FIXED load path, for a convolution that Winograd
// F(4,3) computes that path with each tile for its GEMMs, for a GEMV
// gemvCandidates) on its own GPU,
// on buffers of its own with random contents, and keeps the fastest
// where it beats the rules' choice by more than tuneMargin. The picks
// are written to a per-device JSON file in the cache directory
// (VRUN_CACHE_DIR, else os.UserCacheDir()/vrun), beside the pipeline
// cache, and later runs use them without tuning; VRUN_VK_TUNE=0 ignores
// the file.
//
// The defaults need no tuning: tuning only adds picks where the GPU says
// another choice is faster. A pick that no longer fits the shape or the
// device (a changed file, a smaller device) is ignored.

// Tuner modes.
const (
	tuneOff = iota
	tuneUse
	tuneRun
)

// tuneMode reads VRUN_VK_TUNE (TuneEnv).
func tuneMode() int {
	switch strings.TrimSpace(os.Getenv(TuneEnv)) {
	case "0":
		return tuneOff
	case "1":
		return tuneRun
	}
	return tuneUse
}

// tuneMargin: a candidate replaces the rule's choice only when its GPU
// time is below (1 - tuneMargin) times the rule's.
const tuneMargin = 0.02

// tuneSplits are the K splits the tuner tries.
var tuneSplits = []int{1, 2, 3, 4, 6, 8, 12, 16}

// gemmPick is one tuned choice: a tile, its K split (1: none) and, on
// matmul.comp, whether the pipeline fixes its load path (FIXED); or the
// Winograd path of a convolution; or a GEMV's geometry. Default marks a
// shape where the rules' own choice was the fastest.
type gemmPick struct {
	Default bool `json:"default,omitempty"`
	// Path is "wino" for a convolution on the Winograd kernels (then
	// Tile, when set, is the tile of their GEMMs), "" for the tiled GEMM.
	Path  string `json:"path,omitempty"`
	Tile  string `json:"tile,omitempty"`
	Split int    `json:"split,omitempty"`
	Fixed bool   `json:"fixed,omitempty"`
	// GEMV is the geometry of a GEMV (gemv.comp).
	GEMV *gemvConfig `json:"gemv,omitempty"`
	// US and RuleUS are the GPU microseconds of the pick and of the
	// rule's choice when it was tuned.
	US     float64 `json:"us"`
	RuleUS float64 `json:"rule_us"`
}

// tuneFile is the JSON of a device's tuning cache.
type tuneFile struct {
	Version int    `json:"version"`
	Device  string `json:"device"`
	// Kernels is tuneKernels of the build that timed the picks.
	Kernels string              `json:"kernels"`
	Picks   map[string]gemmPick `json:"picks"`
}

const tuneVersion = 1

// tuneKernels hashes the SPIR-V of the kernels the tuner chooses among
// (the matmul, convgemm, splitk, gemv and wino variants): picks timed
// against other builds of them are dropped.
var tuneKernels = sync.OnceValue(func() string {
	h := sha256.New()
	for _, n := range shaders.Names() {
		for _, p := range []string{"matmul", "convgemm", "splitk_", "gemv", "wino"} {
			if strings.HasPrefix(n, p) {
				b, _ := shaders.SPIRV(n)
				h.Write([]byte(n))
				h.Write(b)
				break
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
})

// tuner is a device's autotuner state.
type tuner struct {
	load             sync.Once // sets path and deviceName, reads picks
	path, deviceName string
	run              sync.Mutex // one shape is timed at a time

	mu    sync.Mutex // guards the fields below
	picks map[string]gemmPick
	// used holds the shapes lowered with a pick; tuned counts the shapes
	// timed by this device, with the sums of their picks' and rules'
	// times; errs are the tuning and cache-writing failures.
	used       map[string]bool
	tuned      int
	us, ruleUS float64
	errs       []string
}

// gemmForce makes a lowering take one candidate of the tuner: pick, or
// with rule the fixed rules (no lookup).
type gemmForce struct {
	pick gemmPick
	rule bool
}

// tunePath is the device's tuning cache file, "" without a cache
// directory.
func (d *device) tunePath() string { return d.cacheFile("vulkan-tune-", ".json") }

// parseTune decodes a tuning cache, keeping the Default and Winograd
// picks, valid GEMV geometries and the picks that name a known tile with
// a split of 1 to 64 slices; a file it cannot read, or one timed with
// other kernels than kernels (tuneKernels), gives none.
func parseTune(b []byte, kernels string) map[string]gemmPick {
	var f tuneFile
	if err := json.Unmarshal(b, &f); err != nil || f.Version != tuneVersion || f.Kernels != kernels {
		return map[string]gemmPick{}
	}
	out := make(map[string]gemmPick, len(f.Picks))
	for k, p := range f.Picks {
		_, inG := tileNamed(gemmTiles, p.Tile)
		_, inC := tileNamed(convTiles, p.Tile)
		switch {
		case p.Default:
			out[k] = gemmPick{Default: true, US: p.US, RuleUS: p.RuleUS}
		case p.Path == "wino":
			if _, ok := tileNamed(gemmTiles, p.Tile); ok || p.Tile == "" {
				out[k] = gemmPick{Path: "wino", Tile: p.Tile, US: p.US, RuleUS: p.RuleUS}
			}
		case p.GEMV != nil:
			if p.GEMV.valid() {
				out[k] = gemmPick{GEMV: p.GEMV, US: p.US, RuleUS: p.RuleUS}
			}
		case p.Path == "" && (inG || inC) && p.Split >= 1 && p.Split <= 64:
			out[k] = gemmPick{Tile: p.Tile, Split: p.Split, Fixed: p.Fixed, US: p.US, RuleUS: p.RuleUS}
		}
	}
	return out
}

// tuner returns the device's tuner, its cache read (once per device).
func (d *device) tuner() *tuner {
	t := &d.tune
	t.load.Do(func() {
		t.path = d.tunePath()
		t.deviceName = d.phys.info.Name
		t.picks = map[string]gemmPick{}
		if t.path != "" {
			if b, err := os.ReadFile(t.path); err == nil {
				t.picks = parseTune(b, tuneKernels())
			}
		}
	})
	return t
}

// save merges the picks into the cache file (another process may have
// added some) and writes it atomically; errors are recorded, not
// returned: the cache is an optimisation. t.mu is held.
func (t *tuner) save() {
	if t.path == "" {
		return
	}
	merged := map[string]gemmPick{}
	if b, err := os.ReadFile(t.path); err == nil {
		merged = parseTune(b, tuneKernels())
	}
	for k, p := range t.picks {
		merged[k] = p
	}
	b, err := json.MarshalIndent(tuneFile{Version: tuneVersion, Device: t.deviceName, Kernels: tuneKernels(), Picks: merged}, "", "\t")
	if err == nil {
		err = os.MkdirAll(filepath.Dir(t.path), 0o755)
	}
	if err == nil {
		err = atomicfile.WriteBytes(t.path, append(b, '\n'))
	}
	if err != nil {
		t.errs = append(t.errs, fmt.Sprintf("writing %s: %v", t.path, err))
	}
}

// TuneReport says what the autotuner did on this device: the shapes it
// timed and what their picks gain over the rules, how many shapes ran
// with a pick, the cache file and any failure. It is "" when the tuner
// did nothing.
func (d *device) TuneReport() string {
	t := d.tuner()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tuned == 0 && len(t.used) == 0 && len(t.errs) == 0 {
		return ""
	}
	var b strings.Builder
	if t.tuned > 0 {
		fmt.Fprintf(&b, "tuned %d GEMM shape%s: %.1f µs of GPU time with the picks, %.1f µs with the rules (%.2fx)",
			t.tuned, plural(t.tuned), t.us, t.ruleUS, t.ruleUS/max(t.us, 1e-9))
	} else {
		b.WriteString("tuned no GEMM shapes")
	}
	fmt.Fprintf(&b, "; %d shape%s ran with a pick; cache %s", len(t.used), plural(len(t.used)), t.path)
	for _, e := range t.errs {
		b.WriteString("; " + e)
	}
	return b.String()
}

// plural is "s" unless n is 1.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// tunedPick returns the tuner's choice for the lowering's op (key names
// its shape): the forced candidate while the tuner times one, else the
// device's pick for key, timing cands() first when VRUN_VK_TUNE=1 and the
// cache holds none. It reports false where the rules decide:
// VRUN_VK_TUNE=0, a test's forceGemmTile, forceSplitK, forceFixed,
// forceConvPath or gemvForce, no pick, or a Default pick.
func (l *lowering) tunedPick(key string, cands func() []gemmPick) (gemmPick, bool) {
	if l.force != nil {
		return l.force.pick, !l.force.rule
	}
	mode := tuneMode()
	if mode == tuneOff || forceGemmTile != "" || forceSplitK > 0 || forceFixed || forceConvPath != "" || gemvForce != nil {
		return gemmPick{}, false // off, or a test's knob, which the rules follow
	}
	t := l.d.tuner()
	t.mu.Lock()
	p, ok := t.picks[key]
	t.mu.Unlock()
	if !ok && mode == tuneRun {
		p, ok = l.d.tuneShape(key, l.op, cands)
	}
	if !ok || p.Default {
		return gemmPick{}, false
	}
	t.mu.Lock()
	if t.used == nil {
		t.used = map[string]bool{}
	}
	t.used[key] = true
	t.mu.Unlock()
	return p, true
}

// tunedGEMM is tunedPick for a tiled GEMM of an m x n (x batch) output
// and depth k on tiles, whose candidates are cands (nil: gemmCandidates
// over tiles): the pick's tile, K split and FIXED. It reports false where
// the rules decide, and for a pick of another path or one that does not
// fit the shape or the device.
func (l *lowering) tunedGEMM(key string, cands func() []gemmPick, tiles []gemmTile, dt rt.DType, m, n, k, batch int) (gemmTile, splitPlan, bool, bool) {
	if cands == nil {
		cands = l.gemmCands(tiles, dt, m, n, k, batch)
	}
	p, ok := l.tunedPick(key, cands)
	if !ok || p.Path != "" || p.GEMV != nil {
		return gemmTile{}, splitPlan{}, false, false
	}
	tl, ok := tileNamed(tiles, p.Tile)
	lim := l.d.phys.limits
	if !ok || !tl.fits(dt, lim.MaxComputeSharedMemorySize, lim.MaxComputeWorkGroupInvocations) {
		return gemmTile{}, splitPlan{}, false, false
	}
	sk := splitPlan{s: 1, ks: k}
	if p.Split > 1 {
		if sk = splitExact(tl, dt, m, n, k, batch, p.Split, l.d.maxRange); sk.s != p.Split {
			return gemmTile{}, splitPlan{}, false, false
		}
	}
	return tl, sk, p.Fixed, true
}

// gemmCands returns the tuner's candidates for a tiled GEMM on the
// lowering's device (gemmCandidates).
func (l *lowering) gemmCands(tiles []gemmTile, dt rt.DType, m, n, k, batch int) func() []gemmPick {
	return func() []gemmPick {
		lim := l.d.phys.limits
		return gemmCandidates(tiles, dt, m, n, k, batch, lim.MaxComputeSharedMemorySize, lim.MaxComputeWorkGroupInvocations, l.d.maxRange)
	}
}

// gemmCandidates lists the tuner's candidates for an m x n (x batch)
// GEMM of depth k: every tile of tiles that fits the device and is less
// than twice the output in each dimension (the smallest that fits where
// none is), each unsplit and in every split of tuneSplits that keeps
// slices at least 64 deep and does not go past 4*gemmTarget workgroups.
func gemmCandidates(tiles []gemmTile, dt rt.DType, m, n, k, batch int, sharedLim, maxInv uint32, maxRange int64) []gemmPick {
	var fit, small []gemmTile
	for _, t := range tiles {
		if !t.fits(dt, sharedLim, maxInv) {
			continue
		}
		small = append(small, t)
		if t.bm < 2*m && t.bn < 2*n {
			fit = append(fit, t)
		}
	}
	if len(fit) == 0 && len(small) > 0 {
		sort.Slice(small, func(i, j int) bool { return small[i].bm*small[i].bn < small[j].bm*small[j].bn })
		fit = small[:1]
	}
	var out []gemmPick
	for _, t := range fit {
		grid := t.grid(m, n, batch)
		for _, s := range tuneSplits {
			if s > 1 && (grid*int64(s) > 4*gemmTarget(false) || k/s < 64) {
				continue
			}
			if s > 1 && splitExact(t, dt, m, n, k, batch, s, maxRange).s != s {
				continue
			}
			out = append(out, gemmPick{Tile: t.name, Split: s})
		}
	}
	return out
}

// tuneShape times the candidates of op (cands()) and stores the pick
// under key. Tuning failures leave the rules in charge.
func (d *device) tuneShape(key string, op rt.Op, cands func() []gemmPick) (gemmPick, bool) {
	t := d.tuner()
	t.run.Lock()
	defer t.run.Unlock()
	t.mu.Lock()
	p, ok := t.picks[key]
	t.mu.Unlock()
	if ok {
		return p, true
	}
	p, err := d.timeCandidates(op, cands())
	t.mu.Lock()
	defer t.mu.Unlock()
	if errors.Is(err, errRuleFails) {
		return gemmPick{}, false // an op the device rejects (Supports says why): nothing to tune
	}
	if err != nil {
		t.errs = append(t.errs, fmt.Sprintf("%s: %v", key, err))
		return gemmPick{}, false
	}
	t.picks[key] = p
	t.tuned++
	t.us += p.US
	t.ruleUS += p.RuleUS
	t.save()
	return p, true
}

// errRuleFails: the rules' own lowering of the op fails (an op the
// device does not run, such as a Conv with a residual on a kernel
// without one), so there is nothing to tune.
var errRuleFails = errors.New("the rules' lowering fails")

// timeCandidates runs a copy of op on buffers of its own: first the rules'
// choice, then each candidate, then on matmul.comp the FIXED variants of
// the two fastest; the best is re-timed against the rule's choice.
func (d *device) timeCandidates(op rt.Op, cands []gemmPick) (gemmPick, error) {
	if _, err := d.lowerWith(op, true, &gemmForce{rule: true}); err != nil {
		return gemmPick{}, errRuleFails
	}
	c, free, err := d.synthOp(op)
	if err != nil {
		return gemmPick{}, err
	}
	defer free()
	st, err := d.NewStream(rt.StreamOptions{Profile: true})
	if err != nil {
		return gemmPick{}, err
	}
	defer st.Close()
	s := st.(*stream)
	rule, err := s.timeForced(c, &gemmForce{rule: true})
	if err != nil {
		return gemmPick{}, err
	}
	type timed struct {
		p  gemmPick
		us float64
	}
	var res []timed
	for _, p := range cands {
		us, err := s.timeForced(c, &gemmForce{pick: p})
		if err != nil {
			continue // a variant this device cannot build or run
		}
		res = append(res, timed{p, us})
	}
	if len(res) == 0 {
		return gemmPick{}, fmt.Errorf("no candidate ran")
	}
	sort.SliceStable(res, func(i, j int) bool { return res[i].us < res[j].us })
	if _, ok := op.(*rt.MatMul); ok {
		for _, r := range res[:min(2, len(res))] {
			p := r.p
			p.Fixed = true
			if us, err := s.timeForced(c, &gemmForce{pick: p}); err == nil {
				res = append(res, timed{p, us})
			}
		}
		sort.SliceStable(res, func(i, j int) bool { return res[i].us < res[j].us })
	}
	// The best against the rule once more, alternating, to damp noise.
	best := res[0]
	for range 2 {
		if us, err := s.timeForced(c, &gemmForce{rule: true}); err == nil {
			rule = min(rule, us)
		}
		if us, err := s.timeForced(c, &gemmForce{pick: best.p}); err == nil {
			best.us = min(best.us, us)
		}
	}
	if best.us >= (1-tuneMargin)*rule {
		return gemmPick{Default: true, US: rule, RuleUS: rule}, nil
	}
	best.p.US, best.p.RuleUS = best.us, rule
	return best.p, nil
}

// timeForced lowers op with force, records it alone on s (a profiling
// stream, reset first) and returns its best GPU time in µs over a few
// runs after a warm-up (wall time where the queue has no timestamps).
func (s *stream) timeForced(op rt.Op, force *gemmForce) (float64, error) {
	s.Reset()
	ds, err := s.d.lowerWith(op, false, force)
	if err != nil {
		return 0, err
	}
	if err := s.launch(op, ds); err != nil {
		return 0, err
	}
	best := math.Inf(1)
	for i, reps := 0, 4; i < reps; i++ {
		start := time.Now()
		if err := s.Submit(); err != nil {
			return 0, err
		}
		if err := s.Wait(); err != nil {
			return 0, err
		}
		us := float64(time.Since(start).Nanoseconds()) / 1e3
		if tm := s.Timings(); s.profile && len(tm) == 1 {
			us = float64(tm[0].Nanoseconds()) / 1e3
		}
		if i == 0 {
			if us > 50e3 {
				reps = 2 // a long GEMM: one timed run after the warm-up
			}
			continue
		}
		best = min(best, us)
	}
	return best, nil
}

// synthOp returns a copy of op whose operands live in buffers of their
// own (each at the same offset modulo 256 bytes, so that the alignment
// rules choose as for op), the inputs filled with random values in
// [-1, 1), and a function that frees them.
func (d *device) synthOp(op rt.Op) (rt.Op, func(), error) {
	c := rt.CloneOp(op)
	var bufs []rt.Buffer
	free := func() {
		for _, b := range bufs {
			b.Free()
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, o := range rt.Operands(c) {
		r := o.Ref
		if r.Buf == nil {
			continue
		}
		lo, hi := r.Span()
		if !o.Strided && o.Need > 0 {
			hi = max(hi, r.Off+o.Need*int64(r.DType.Size()))
		}
		base := lo % 256
		b, err := d.Alloc(max(base+hi-lo, 4))
		if err != nil {
			free()
			return nil, nil, fmt.Errorf("tuning buffer of %d bytes: %w", base+hi-lo, err)
		}
		bufs = append(bufs, b)
		r.Off = base + (r.Off - lo)
		r.Buf = b
		if o.Output {
			continue
		}
		if err := d.Write(b, 0, randomBytes(rng, r.DType, b.Size())); err != nil {
			free()
			return nil, nil, err
		}
	}
	return c, free, nil
}

// randomBytes returns size bytes of values of dt in [-1, 1) (random bytes
// for other dtypes).
func randomBytes(rng *rand.Rand, dt rt.DType, size int64) []byte {
	out := make([]byte, size)
	le := binary.LittleEndian
	switch dt {
	case rt.F32:
		for i := int64(0); i+4 <= size; i += 4 {
			le.PutUint32(out[i:], math.Float32bits(2*rng.Float32()-1))
		}
	case rt.F64:
		for i := int64(0); i+8 <= size; i += 8 {
			le.PutUint64(out[i:], math.Float64bits(2*rng.Float64()-1))
		}
	case rt.F16:
		for i := int64(0); i+2 <= size; i += 2 {
			le.PutUint16(out[i:], float16.Fromfloat32(2*rng.Float32()-1).Bits())
		}
	default:
		for i := range out {
			out[i] = byte(rng.Uint32())
		}
	}
	return out
}
