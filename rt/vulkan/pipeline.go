//go:build cgo

package vulkan

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	vk "github.com/goki/vulkan"
	"github.com/vrun-go/vrun/rt"
	"github.com/vrun-go/vrun/shaders"
)

// pushSize is the push-constant range of every pipeline layout: the
// guaranteed minimum maxPushConstantsSize.
const pushSize = 128

// layout is a pipeline layout with n storage-buffer bindings in set 0.
type layout struct {
	dsl uint64 // VkDescriptorSetLayout
	pl  uint64 // VkPipelineLayout
	n   int
}

type pipeline struct {
	name string
	key  string
	pl   uint64 // VkPipeline, once ready is closed and err is nil
	lay  *layout
	// ready is closed once the pipeline is created or has failed (err).
	ready chan struct{}
	err   error
}

// getLayout returns the layout for n bindings; d.mu is held.
func (d *device) getLayout(n int) (*layout, error) {
	if l := d.layouts[n]; l != nil {
		return l, nil
	}
	dsl, pl, r := d.vd.createLayouts(uint32(n), pushSize)
	if r != vk.Success {
		return nil, d.resultErr("vkCreateDescriptorSetLayout/vkCreatePipelineLayout", r)
	}
	l := &layout{n: n, dsl: dsl, pl: pl}
	d.layouts[n] = l
	return l, nil
}

// spvOverride names a folder of NAME.spv files that replace the embedded
// shader variants of the same name: for trying a shader change on a
// machine without the Go toolchain (compile it with glslc elsewhere,
// copy the folder over, point VRUN_VK_SPV at it).
const spvOverride = "VRUN_VK_SPV"

// spirv returns the named variant's blob, checked.
func spirv(name string) ([]uint32, error) {
	b, ok := shaders.SPIRV(name)
	if dir := os.Getenv(spvOverride); dir != "" {
		if f, err := os.ReadFile(filepath.Join(dir, name+".spv")); err == nil {
			b, ok = f, true
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("vulkan: %s: %w", spvOverride, err)
		}
	}
	if !ok {
		return nil, fmt.Errorf("vulkan: shader variant %q is missing from package shaders (run go generate ./shaders)", name)
	}
	if len(b) < 20 || len(b)%4 != 0 || binary.LittleEndian.Uint32(b) != 0x07230203 {
		return nil, fmt.Errorf("vulkan: shader variant %q is not valid SPIR-V (%d bytes)", name, len(b))
	}
	w := make([]uint32, len(b)/4)
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return w, nil
}

// pipeKey names a shader variant with its specialization constants.
func pipeKey(name string, spec []uint32) string {
	key := name
	for _, s := range spec {
		key += "/" + strconv.FormatUint(uint64(s), 10)
	}
	return key
}

// getPipeline returns the compute pipeline of a shader variant with
// specialization constants spec (constant_id i = spec[i]), creating it on
// first use. Pipelines of different keys are created concurrently (the
// VkPipelineCache is internally synchronized); callers asking for one
// being created wait for it. A failed creation is not remembered: the
// next call tries again.
func (d *device) getPipeline(name string, nbind int, spec []uint32) (*pipeline, error) {
	p, owner, err := d.claimPipeline(name, nbind, spec)
	if err != nil {
		return nil, err
	}
	if owner {
		d.buildPipeline(p, spec)
	}
	<-p.ready
	if p.err != nil {
		return nil, p.err
	}
	return p, nil
}

// claimPipeline returns the entry of the variant, adding it when absent;
// owner tells the caller that it must build the new entry.
func (d *device) claimPipeline(name string, nbind int, spec []uint32) (p *pipeline, owner bool, err error) {
	key := pipeKey(name, spec)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pipes == nil {
		return nil, false, fmt.Errorf("vulkan: device closed")
	}
	if p := d.pipes[key]; p != nil {
		return p, false, nil
	}
	lay, err := d.getLayout(nbind)
	if err != nil {
		return nil, false, err
	}
	p = &pipeline{name: name, key: key, lay: lay, ready: make(chan struct{})}
	d.pipes[key] = p
	d.building.Add(1)
	return p, true, nil
}

// buildPipeline creates p's VkPipeline without holding d.mu, then marks
// it ready; a failed entry leaves the map.
func (d *device) buildPipeline(p *pipeline, spec []uint32) {
	defer d.building.Done()
	defer close(p.ready)
	code, err := spirv(p.name)
	if err == nil {
		var sgs uint32
		if d.phys.coopPin && isKHRCoopVariant(p.name) {
			sgs = d.phys.coop.SGS // a KHR cooperative-matrix variant's layout
		}
		h, r := d.vd.createPipeline(d.pcache, code, p.lay.pl, spec, sgs)
		if r != vk.Success {
			err = fmt.Errorf("vulkan: shader variant %q: vkCreateComputePipelines: %v", p.name, vkErr(r))
		}
		p.pl = h
	}
	if err != nil {
		p.err = err
		d.mu.Lock()
		if d.pipes != nil && d.pipes[p.key] == p {
			delete(d.pipes, p.key)
		}
		d.mu.Unlock()
		return
	}
	d.pipesMade.Add(1)
}

// Prepare creates the compute pipelines of ops ahead of their launch
// (rt.Preparer), concurrently: every variant the ops lower to, and only
// those. Ops the device cannot run are skipped (Stream.Launch reports
// them). It returns the pipeline creation errors.
func (d *device) Prepare(ops []rt.Op) error {
	if d.noPrepare {
		return nil
	}
	type want struct {
		name  string
		nbind int
		spec  []uint32
	}
	var wants []want
	seen := map[string]bool{}
	for _, op := range ops {
		ds, err := d.lowerOp(op, true)
		if err != nil {
			continue
		}
		for _, x := range ds {
			k := pipeKey(x.shader, x.spec)
			if !seen[k] {
				seen[k] = true
				wants = append(wants, want{x.shader, len(x.binds), x.spec})
			}
		}
	}
	errs := make([]error, len(wants))
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	var wg sync.WaitGroup
	for i, w := range wants {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			_, errs[i] = d.getPipeline(w.name, w.nbind, w.spec)
			if errs[i] != nil && isCoopVariant(w.name) {
				// As in coopMatMul: a listed shape that does not build
				// falls back to matmul.comp.
				d.coopFailed.Store(true)
			}
			if errs[i] != nil && isCoop2Variant(w.name) {
				d.coop2Failed.Store(true) // as in coop2MatMul
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// PipelinesCreated is the number of compute pipelines the device has
// created (tests: a run after Prepare creates none).
func (d *device) PipelinesCreated() int64 { return d.pipesMade.Load() }

// ---- pipeline cache persistence ----

func cacheDir() string {
	if d := os.Getenv("VRUN_CACHE_DIR"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "vrun")
}

// cachePath is the device's pipeline cache file, "" without a cache
// directory.
func (d *device) cachePath() string { return d.cacheFile("vulkan-", ".bin") }

// cacheFile is the file PREFIX-VENDOR-DEVICE-PIPELINECACHEUUID.EXT of
// the device in the cache directory (one per device and driver build),
// "" without a cache directory.
func (d *device) cacheFile(prefix, ext string) string {
	dir := cacheDir()
	if dir == "" {
		return ""
	}
	p := d.phys.props
	return filepath.Join(dir, fmt.Sprintf("%s%04x-%04x-%s%s", prefix, p.VendorID, p.DeviceID, hex.EncodeToString(p.PipelineCacheUUID[:]), ext))
}

// validCacheHeader checks a VkPipelineCacheHeaderVersionOne against the device.
func (d *device) validCacheHeader(b []byte) bool {
	if len(b) < 32 {
		return false
	}
	le := binary.LittleEndian
	p := d.phys.props
	return le.Uint32(b[0:]) >= 32 && le.Uint32(b[4:]) == 1 &&
		le.Uint32(b[8:]) == p.VendorID && le.Uint32(b[12:]) == p.DeviceID &&
		bytes.Equal(b[16:32], p.PipelineCacheUUID[:])
}

func (d *device) loadPipelineCache() {
	var data []byte
	if path := d.cachePath(); path != "" {
		if b, err := os.ReadFile(path); err == nil && d.validCacheHeader(b) {
			data = b
		}
	}
	pc, r := d.vd.createPipelineCache(data)
	if r != vk.Success && data != nil {
		// A cache the driver rejects is ignored.
		pc, r = d.vd.createPipelineCache(nil)
	}
	if r == vk.Success {
		d.pcache = pc
	}
}

// savePipelineCache writes the cache atomically; errors are ignored (the
// cache is an optimisation). No pipeline is being created.
func (d *device) savePipelineCache() {
	path := d.cachePath()
	if d.pcache == 0 || path == "" || d.pipesMade.Load() == 0 {
		return
	}
	buf, r := d.vd.pipelineCacheData(d.pcache)
	if r != vk.Success || len(buf) == 0 {
		return
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".vulkan-cache-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(buf)
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), path) != nil {
		os.Remove(tmp.Name())
	}
}

// waitTimeout is how long Wait blocks before giving up: VRUN_VK_TIMEOUT
// (a Go duration) or 5 minutes.
func waitTimeout() time.Duration {
	if s := os.Getenv("VRUN_VK_TIMEOUT"); s != "" {
		if t, err := time.ParseDuration(strings.TrimSpace(s)); err == nil && t > 0 {
			return t
		}
	}
	return 5 * time.Minute
}
