//go:build cgo

package vulkan

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	vk "github.com/goki/vulkan"
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
	pl   uint64 // VkPipeline
	lay  *layout
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

// spirv returns the named variant's blob, checked.
func spirv(name string) ([]uint32, error) {
	b, ok := shaders.SPIRV(name)
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

// getPipeline returns the compute pipeline of a shader variant with
// specialization constants spec (constant_id i = spec[i]), creating it on
// first use.
func (d *device) getPipeline(name string, nbind int, spec []uint32) (*pipeline, error) {
	key := name
	for _, s := range spec {
		key += "/" + strconv.FormatUint(uint64(s), 10)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pipes == nil {
		return nil, fmt.Errorf("vulkan: device closed")
	}
	if p := d.pipes[key]; p != nil {
		return p, nil
	}
	code, err := spirv(name)
	if err != nil {
		return nil, err
	}
	lay, err := d.getLayout(nbind)
	if err != nil {
		return nil, err
	}
	h, r := d.vd.createPipeline(d.pcache, code, lay.pl, spec)
	if r != vk.Success {
		return nil, fmt.Errorf("vulkan: shader variant %q: vkCreateComputePipelines: %v", name, vkErr(r))
	}
	p := &pipeline{name: name, pl: h, lay: lay}
	d.pipes[key] = p
	return p, nil
}

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

func (d *device) cachePath() string {
	dir := cacheDir()
	if dir == "" {
		return ""
	}
	p := d.phys.props
	return filepath.Join(dir, fmt.Sprintf("vulkan-%04x-%04x-%s.bin", p.VendorID, p.DeviceID, hex.EncodeToString(p.PipelineCacheUUID[:])))
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
// cache is an optimisation). d.mu is held.
func (d *device) savePipelineCache() {
	path := d.cachePath()
	if d.pcache == 0 || path == "" || len(d.pipes) == 0 {
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
