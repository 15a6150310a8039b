package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"

	"github.com/vrun-go/vrun"
	"github.com/vrun-go/vrun/rt"
)

// jsonFloat is a float64 that marshals NaN and the infinities, which JSON
// cannot hold as numbers, as the strings "NaN", "+Inf" and "-Inf".
type jsonFloat float64

func (f jsonFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	switch {
	case math.IsNaN(v):
		return []byte(`"NaN"`), nil
	case math.IsInf(v, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(v, -1):
		return []byte(`"-Inf"`), nil
	}
	return []byte(strconv.FormatFloat(v, 'g', -1, 64)), nil
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// stats summarises a tensor's values, NaN-aware: min and max are over the
// values that are not NaN, mean and std over the finite ones, and NaNs and
// infinities are counted.
type stats struct {
	Count  int        `json:"count"`
	Min    *jsonFloat `json:"min"`  // nil when every value is NaN
	Max    *jsonFloat `json:"max"`  //
	Mean   *jsonFloat `json:"mean"` // nil when no value is finite
	Std    *jsonFloat `json:"std"`  //
	NaN    int        `json:"nan"`
	PosInf int        `json:"pos_inf"`
	NegInf int        `json:"neg_inf"`
}

func statsOf(t *rt.Tensor) stats {
	n := t.Len()
	s := stats{Count: n}
	mn, mx := math.Inf(1), math.Inf(-1)
	var sum, sq float64
	finite, seen := 0, 0
	for i := 0; i < n; i++ {
		v := t.Float64(i)
		switch {
		case math.IsNaN(v):
			s.NaN++
			continue
		case math.IsInf(v, 1):
			s.PosInf++
		case math.IsInf(v, -1):
			s.NegInf++
		default:
			finite++
			sum += v
			sq += v * v
		}
		seen++
		mn, mx = math.Min(mn, v), math.Max(mx, v)
	}
	ptr := func(v float64) *jsonFloat { f := jsonFloat(v); return &f }
	if seen > 0 {
		s.Min, s.Max = ptr(mn), ptr(mx)
	}
	if finite > 0 {
		mean := sum / float64(finite)
		s.Mean, s.Std = ptr(mean), ptr(math.Sqrt(math.Max(0, sq/float64(finite)-mean*mean)))
	}
	return s
}

func (s stats) String() string {
	if s.Count == 0 {
		return "(empty)"
	}
	g := func(f *jsonFloat) string { return fmt.Sprintf("%.6g", float64(*f)) }
	var b strings.Builder
	switch {
	case s.Min == nil:
		fmt.Fprintf(&b, "all %d values are NaN", s.Count)
	case s.Mean == nil:
		fmt.Fprintf(&b, "min %s  max %s  (no finite values)", g(s.Min), g(s.Max))
	default:
		fmt.Fprintf(&b, "min %s  max %s  mean %s  std %s", g(s.Min), g(s.Max), g(s.Mean), g(s.Std))
		if s.NaN+s.PosInf+s.NegInf > 0 {
			b.WriteString(" (of the finite values)")
		}
	}
	if s.NaN > 0 && s.Min != nil {
		fmt.Fprintf(&b, "  NaN %d", s.NaN)
	}
	if s.PosInf > 0 {
		fmt.Fprintf(&b, "  +Inf %d", s.PosInf)
	}
	if s.NegInf > 0 {
		fmt.Fprintf(&b, "  -Inf %d", s.NegInf)
	}
	return b.String()
}

// topEntry is one class of a classifier output's top 5.
type topEntry struct {
	Index int       `json:"index"`
	Label string    `json:"label,omitempty"`
	Value jsonFloat `json:"value"`
}

// top5 returns the top classes of the first row of a classifier output (a
// float tensor [N, C] or [C] with C >= 2), largest first; NaNs never rank
// and are counted in nan. ok is false for other tensors.
func top5(t *rt.Tensor, names []string) (top []topEntry, nan int, ok bool) {
	if !t.DType.IsFloat() || len(t.Shape) == 0 || len(t.Shape) > 2 {
		return nil, 0, false
	}
	c := t.Shape[len(t.Shape)-1]
	if c < 2 || t.Len() == 0 {
		return nil, 0, false
	}
	idx := make([]int, 0, c)
	for i := 0; i < c; i++ {
		if math.IsNaN(t.Float64(i)) {
			nan++
			continue
		}
		idx = append(idx, i)
	}
	sort.SliceStable(idx, func(a, b int) bool { return t.Float64(idx[a]) > t.Float64(idx[b]) })
	for _, k := range idx[:min(5, len(idx))] {
		e := topEntry{Index: k, Value: jsonFloat(t.Float64(k))}
		if k < len(names) {
			e.Label = names[k]
		}
		top = append(top, e)
	}
	return top, nan, true
}

func top5String(t *rt.Tensor, top []topEntry, nan int) string {
	var parts []string
	for _, e := range top {
		label := strconv.Itoa(e.Index)
		if e.Label != "" {
			label = fmt.Sprintf("%d %q", e.Index, e.Label)
		}
		parts = append(parts, fmt.Sprintf("%s (%.4g)", label, float64(e.Value)))
	}
	row := ""
	if len(t.Shape) == 2 && t.Shape[0] > 1 {
		row = " of row 0"
	}
	s := strings.Join(parts, ", ")
	switch {
	case len(top) == 0:
		s = fmt.Sprintf("none: all %d values are NaN", nan)
	case nan > 0:
		s += fmt.Sprintf(" (%d NaN not ranked)", nan)
	}
	return fmt.Sprintf("top-5%s: %s", row, s)
}

// versionInfo describes this build of vrun.
type versionInfo struct {
	Version  string   `json:"version"`
	Revision string   `json:"revision,omitempty"`
	Time     string   `json:"time,omitempty"`
	Modified bool     `json:"modified,omitempty"`
	Go       string   `json:"go"`
	OS       string   `json:"os"`
	Arch     string   `json:"arch"`
	Cgo      bool     `json:"cgo"`
	Backends []string `json:"backends"`
}

func buildVersion() versionInfo {
	v := versionInfo{Version: "(devel)", Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Revision = s.Value
			case "vcs.time":
				v.Time = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			case "CGO_ENABLED":
				v.Cgo = s.Value == "1"
			}
		}
	}
	for _, b := range rt.Backends() {
		v.Backends = append(v.Backends, b.Name())
	}
	return v
}

func (v versionInfo) String() string {
	s := "vrun " + v.Version
	if v.Revision != "" {
		rev := v.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		s += " " + rev
		if v.Time != "" {
			s += " " + v.Time
		}
		if v.Modified {
			s += " (modified)"
		}
	}
	cgo := "off"
	if v.Cgo {
		cgo = "on"
	}
	return fmt.Sprintf("%s\n%s %s/%s, cgo %s\nbackends: %s\n", s, v.Go, v.OS, v.Arch, cgo, strings.Join(v.Backends, " "))
}

// deviceJSON is one device of `vrun devices -json`.
type deviceJSON struct {
	Spec     string            `json:"spec"`
	Name     string            `json:"name"`
	Kind     string            `json:"kind"`
	Driver   string            `json:"driver,omitempty"`
	Memory   int64             `json:"memory"`
	MaxAlloc int64             `json:"max_alloc,omitempty"`
	MaxRange int64             `json:"max_range,omitempty"`
	FP16     bool              `json:"fp16"`
	FP64     bool              `json:"fp64"`
	Unified  bool              `json:"unified"`
	UUID     string            `json:"uuid,omitempty"`
	Logical  bool              `json:"logical,omitempty"`
	SameAs   []string          `json:"same_as,omitempty"`
	Details  map[string]string `json:"details,omitempty"`
}

type backendJSON struct {
	Backend string       `json:"backend"`
	Error   string       `json:"error,omitempty"`
	Devices []deviceJSON `json:"devices"`
}

func devicesJSON() []backendJSON {
	out := []backendJSON{}
	ls := rt.ListDevices()
	same := rt.SameAs(ls)
	for _, l := range ls {
		b := backendJSON{Backend: l.Backend, Devices: []deviceJSON{}}
		if l.Err != nil {
			b.Error = l.Err.Error()
		}
		for _, d := range l.Devices {
			dj := deviceJSON{Spec: d.Spec(), Name: d.Name, Kind: d.Kind.String(), Driver: d.Driver, Memory: d.Memory,
				MaxAlloc: d.MaxAlloc, MaxRange: d.MaxRange, FP16: d.FP16, FP64: d.FP64, Unified: d.Unified,
				UUID: d.UUID, Logical: d.Logical, SameAs: same[d.Spec()]}
			for _, kv := range d.Details {
				if dj.Details == nil {
					dj.Details = map[string]string{}
				}
				dj.Details[kv[0]] = kv[1]
			}
			b.Devices = append(b.Devices, dj)
		}
		out = append(out, b)
	}
	return out
}

// tensorJSON is an input or output of `vrun -json` and `vrun info -json`.
type tensorJSON struct {
	Name     string      `json:"name"`
	DType    string      `json:"dtype"`
	Shape    []int64     `json:"shape"`
	DimNames []string    `json:"dim_names,omitempty"`
	Source   string      `json:"source,omitempty"`
	Stats    *stats      `json:"stats,omitempty"`
	First    []jsonFloat `json:"first,omitempty"`
	Top5     []topEntry  `json:"top5,omitempty"`
	File     string      `json:"file,omitempty"`
}

func ints64(s []int) []int64 {
	out := make([]int64, len(s))
	for i, v := range s {
		out[i] = int64(v)
	}
	return out
}

// benchResult is the outcome of -bench.
type benchResult struct {
	Runs     int     `json:"runs"`
	Warmup   int     `json:"warmup"`
	MinMS    float64 `json:"min_ms"`
	MedianMS float64 `json:"median_ms"`
	P90MS    float64 `json:"p90_ms"`
	// RunsPerS and ItemsPerS are 0 when the runs took less time than
	// the clock can see.
	RunsPerS  float64 `json:"runs_per_s"`
	ItemsPerS float64 `json:"items_per_s"`
	Batch     int     `json:"batch"`
}

type profileJSON struct {
	Node    string  `json:"node"`
	Op      string  `json:"op"`
	MS      float64 `json:"ms"`
	Percent float64 `json:"percent"`
}

// runJSON is the result of `vrun -json MODEL`.
type runJSON struct {
	Model      string        `json:"model"`
	Device     deviceRef     `json:"device"`
	Inputs     []tensorJSON  `json:"inputs"`
	Outputs    []tensorJSON  `json:"outputs"`
	PlanMS     float64       `json:"plan_ms"`
	FirstRunMS float64       `json:"first_run_ms"`
	ChunkRows  int           `json:"chunk_rows,omitempty"`
	Bench      *benchResult  `json:"bench,omitempty"`
	Profile    []profileJSON `json:"profile,omitempty"`
	Memory     *memoryJSON   `json:"memory,omitempty"`
	// Precision, with -precision f16, says how many weight ops took f16.
	Precision *precisionJSON `json:"precision,omitempty"`
	// Tune is each Vulkan device's autotuner report (-tune, or picks
	// from its cache), as "vulkan:0: tuned ...".
	Tune []string `json:"tune,omitempty"`
}

// precisionJSON reports -precision f16: the Conv and MatMul ops whose
// weights are stored in f16, those that kept f32 weights, and why.
type precisionJSON struct {
	Weights string   `json:"weights"`
	HalfOps int      `json:"f16_weight_ops"`
	KeptOps int      `json:"f32_weight_ops"`
	Notes   []string `json:"notes,omitempty"`
}

// memoryJSON is the device memory of the model's session (the first
// device's, with a device list), with -profile.
type memoryJSON struct {
	ArenaBytes   int64   `json:"arena_bytes"`
	WeightBytes  int64   `json:"weight_bytes"`
	PoolInUse    int64   `json:"pool_in_use_bytes"`
	PoolReserved int64   `json:"pool_reserved_bytes"`
	PoolPeak     int64   `json:"pool_peak_reserved_bytes"`
	PoolFrag     float64 `json:"pool_fragmentation"`
	PinnedBytes  int64   `json:"pinned_host_bytes"`
	Pool         string  `json:"pool"`
}

func memoryOf(m *vrun.Model) *memoryJSON {
	st := m.MemoryStats()
	p := st.Pool
	return &memoryJSON{ArenaBytes: st.Arenas, WeightBytes: st.Weights, PoolInUse: p.InUse, PoolReserved: p.Reserved,
		PoolPeak: p.PeakReserved, PoolFrag: p.Fragmentation(), PinnedBytes: p.HostReserved, Pool: p.String()}
}

func printMemory(w io.Writer, mem *memoryJSON) {
	fmt.Fprintf(w, "memory   arenas %s, weights %s\n", vrun.FormatBytes(mem.ArenaBytes), vrun.FormatBytes(mem.WeightBytes))
	fmt.Fprintf(w, "         pool: %s\n", mem.Pool)
}

type deviceRef struct {
	Spec string `json:"spec"` // "cpu:0", or a list "cpu:0,opencl:0"
	Name string `json:"name"` // the device's name; a list's joined by " + "
	// Devices are a device list's devices, in order.
	Devices []deviceRef `json:"devices,omitempty"`
}

// modelDevices describes the model's device, or its device list.
func modelDevices(m *vrun.Model) deviceRef {
	if len(m.Devices) <= 1 {
		info := m.Device.Info()
		return deviceRef{Spec: info.Spec(), Name: info.Name}
	}
	r := deviceRef{Spec: m.DeviceSpecs()}
	var names []string
	for _, d := range m.Devices {
		info := d.Info()
		r.Devices = append(r.Devices, deviceRef{Spec: info.Spec(), Name: info.Name})
		names = append(names, info.Name)
	}
	r.Name = strings.Join(names, " + ")
	return r
}

// infoJSON is the result of `vrun info -json MODEL`.
type infoJSON struct {
	Model       string            `json:"model"`
	Meta        map[string]string `json:"meta,omitempty"`
	Inputs      []tensorJSON      `json:"inputs"`
	Outputs     []tensorJSON      `json:"outputs"`
	Params      int64             `json:"params"`
	Weights     int               `json:"weights"`
	WeightBytes int64             `json:"weight_bytes"`
	Nodes       int               `json:"nodes"`
	NodeCounts  map[string]int    `json:"node_counts"`
	Device      deviceRef         `json:"device"`
	Plan        planJSON          `json:"plan"`
}

type planJSON struct {
	InputShapes  map[string][]int `json:"input_shapes"`
	Ops          int              `json:"ops"`
	OpCounts     map[string]int   `json:"op_counts"`
	ArenaBytes   int64            `json:"arena_bytes"`
	TensorBytes  int64            `json:"tensor_bytes"`
	DeviceWeight int64            `json:"device_weight_bytes"`
	ChunkRows    int              `json:"chunk_rows,omitempty"`
	Rows         int              `json:"rows,omitempty"`
	ChunkReason  string           `json:"chunk_reason,omitempty"`
}
