//go:build cgo

package vulkan

import (
	"fmt"
	"time"
	"unsafe"

	vk "github.com/goki/vulkan"
	"github.com/vrun-go/vrun/rt"
)

type cmdKind uint8

const (
	cmdWrite cmdKind = iota
	cmdRead
	cmdLaunch
)

// command is one recorded stream command.
type command struct {
	kind  cmdKind
	b     *buffer
	off   int64
	host  []byte // Write source / Read destination
	stOff int64  // offset in the stream's staging buffer
	disps []dispatch
}

// stream records commands Go-side; the first Submit after a change records
// them into one VkCommandBuffer, which later Submits replay.
type stream struct {
	d       *device
	profile bool
	cmds    []command
	nLaunch int
	dirty   bool

	pool     vk.CommandPool
	cb       vk.CommandBuffer
	fence    vk.Fence
	dpool    vk.DescriptorPool
	stage    *buffer
	qpool    vk.QueryPool
	nq       uint32
	recorded bool

	inflight bool
	timings  []time.Duration
	closed   bool

	// scratch is the split-K scratch buffer (bound where a dispatch binds
	// scratchBuf), allocated by Launch to the largest size any recorded
	// op needs; outgrown ones wait in retired until no recording uses
	// them. Freed on Reset and Close.
	scratch *buffer
	retired []*buffer
}

func (d *device) NewStream(opts rt.StreamOptions) (rt.Stream, error) {
	defer noGC()()
	if err := d.check(); err != nil {
		return nil, err
	}
	s := &stream{d: d, profile: opts.Profile && d.phys.tsBits > 0, dirty: true}
	var pool vk.CommandPool
	var fence vk.Fence
	if r := vk.CreateCommandPool(d.dev, &vk.CommandPoolCreateInfo{
		SType:            vk.StructureTypeCommandPoolCreateInfo,
		Flags:            vk.CommandPoolCreateFlags(vk.CommandPoolCreateResetCommandBufferBit),
		QueueFamilyIndex: uint32(d.phys.qfam),
	}, nil, &pool); r != vk.Success {
		return nil, d.resultErr("vkCreateCommandPool", r)
	}
	s.pool = pool
	cbs := make([]vk.CommandBuffer, 1)
	if r := vk.AllocateCommandBuffers(d.dev, &vk.CommandBufferAllocateInfo{
		SType: vk.StructureTypeCommandBufferAllocateInfo, CommandPool: s.pool,
		Level: vk.CommandBufferLevelPrimary, CommandBufferCount: 1,
	}, cbs); r != vk.Success {
		vk.DestroyCommandPool(d.dev, s.pool, nil)
		return nil, d.resultErr("vkAllocateCommandBuffers", r)
	}
	s.cb = cbs[0]
	if r := vk.CreateFence(d.dev, &vk.FenceCreateInfo{SType: vk.StructureTypeFenceCreateInfo}, nil, &fence); r != vk.Success {
		vk.DestroyCommandPool(d.dev, s.pool, nil)
		return nil, d.resultErr("vkCreateFence", r)
	}
	s.fence = fence
	d.mu.Lock()
	d.streams[s] = struct{}{}
	d.mu.Unlock()
	return s, nil
}

func (s *stream) usable() error {
	if s.closed {
		return fmt.Errorf("vulkan: stream: %w", rt.ErrClosed)
	}
	return s.d.check()
}

func (s *stream) Write(dst rt.Buffer, off int64, src []byte) error {
	if err := s.usable(); err != nil {
		return err
	}
	b, err := s.d.own(dst)
	if err != nil {
		return err
	}
	if err := checkRange(b, off, int64(len(src))); err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	s.cmds = append(s.cmds, command{kind: cmdWrite, b: b, off: off, host: src})
	s.dirty = true
	return nil
}

func (s *stream) Read(dst []byte, src rt.Buffer, off int64) error {
	if err := s.usable(); err != nil {
		return err
	}
	b, err := s.d.own(src)
	if err != nil {
		return err
	}
	if err := checkRange(b, off, int64(len(dst))); err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	s.cmds = append(s.cmds, command{kind: cmdRead, b: b, off: off, host: dst})
	s.dirty = true
	return nil
}

func (s *stream) Launch(op rt.Op) error {
	defer noGC()()
	if err := s.usable(); err != nil {
		return err
	}
	ds, err := s.d.lower(op)
	if err != nil {
		return err
	}
	for i := range ds {
		p, err := s.d.getPipeline(ds[i].shader, len(ds[i].binds), ds[i].spec)
		if err != nil {
			return fmt.Errorf("%s: %w", op.OpName(), err)
		}
		ds[i].pipe = p
	}
	if err := s.ensureScratch(ds); err != nil {
		return fmt.Errorf("%s: %w", op.OpName(), err)
	}
	s.cmds = append(s.cmds, command{kind: cmdLaunch, disps: ds})
	s.nLaunch++
	s.dirty = true
	return nil
}

// ensureScratch grows the scratch buffer to what ds need. The old
// buffer may still be used by a submitted recording: it is released once
// the stream re-records, resets or closes.
func (s *stream) ensureScratch(ds []dispatch) error {
	var need int64
	for _, x := range ds {
		need = max(need, x.scratch)
	}
	if need == 0 || s.scratch != nil && s.scratch.size >= need {
		return nil
	}
	b, err := s.d.newBuffer(need, s.d.bufType, false)
	if err != nil {
		return err
	}
	if s.scratch != nil {
		s.retired = append(s.retired, s.scratch)
	}
	s.scratch = b
	return nil
}

// freeScratch releases the scratch buffers; nothing in flight uses them.
func (s *stream) freeScratch() {
	for _, b := range s.retired {
		b.release()
	}
	s.retired = nil
	if s.scratch != nil {
		s.scratch.release()
		s.scratch = nil
	}
}

func (s *stream) Reset() {
	defer noGC()()
	if s.inflight {
		s.Wait()
	}
	if !s.inflight && !s.closed && s.d.dev != nil {
		s.freeRecording()
		s.freeScratch()
	}
	s.cmds = nil
	s.nLaunch = 0
	s.timings = nil
	s.dirty = true
}

// freeRecording releases the objects of the last recording.
func (s *stream) freeRecording() {
	dev := s.d.dev
	if s.dpool != nil {
		vk.DestroyDescriptorPool(dev, s.dpool, nil)
		s.dpool = nil
	}
	if s.qpool != nil {
		vk.DestroyQueryPool(dev, s.qpool, nil)
		s.qpool = nil
	}
	if s.stage != nil {
		s.stage.release()
		s.stage = nil
	}
	for _, b := range s.retired {
		b.release()
	}
	s.retired = nil
	s.recorded = false
}

func overlaps(list []span, x span) bool {
	for _, y := range list {
		if y.b == x.b && y.lo < x.hi && x.lo < y.hi {
			return true
		}
	}
	return false
}

// record builds the command buffer from the command list.
func (s *stream) record() error {
	d := s.d
	dev := d.dev
	s.freeRecording()
	vk.ResetCommandBuffer(s.cb, 0)

	var stageSize int64
	var nsets, nbinds int
	for i := range s.cmds {
		c := &s.cmds[i]
		switch c.kind {
		case cmdWrite, cmdRead:
			c.stOff = stageSize
			stageSize += (int64(len(c.host)) + 15) &^ 15
		case cmdLaunch:
			for _, x := range c.disps {
				nsets++
				nbinds += len(x.binds)
			}
		}
	}
	if stageSize > 0 {
		st, err := d.newBuffer(stageSize, d.stageType, true)
		if err != nil {
			return err
		}
		s.stage = st
	}
	if nsets > 0 {
		var dp vk.DescriptorPool
		if r := vk.CreateDescriptorPool(dev, &vk.DescriptorPoolCreateInfo{
			SType: vk.StructureTypeDescriptorPoolCreateInfo, MaxSets: uint32(nsets), PoolSizeCount: 1,
			PPoolSizes: []vk.DescriptorPoolSize{{Type: vk.DescriptorTypeStorageBuffer, DescriptorCount: uint32(nbinds)}},
		}, nil, &dp); r != vk.Success {
			return d.resultErr("vkCreateDescriptorPool", r)
		}
		s.dpool = dp
	}
	s.nq = 0
	if s.profile && s.nLaunch > 0 {
		s.nq = uint32(2 * s.nLaunch)
		var qp vk.QueryPool
		if r := vk.CreateQueryPool(dev, &vk.QueryPoolCreateInfo{
			SType: vk.StructureTypeQueryPoolCreateInfo, QueryType: vk.QueryTypeTimestamp, QueryCount: s.nq,
		}, nil, &qp); r != vk.Success {
			return d.resultErr("vkCreateQueryPool", r)
		}
		s.qpool = qp
	}

	cb := s.cb
	if r := vk.BeginCommandBuffer(cb, &vk.CommandBufferBeginInfo{SType: vk.StructureTypeCommandBufferBeginInfo}); r != vk.Success {
		return d.resultErr("vkBeginCommandBuffer", r)
	}
	if s.qpool != nil {
		vk.CmdResetQueryPool(cb, s.qpool, 0, s.nq)
	}
	var pendW, pendR []span
	barrier := func() {
		vk.CmdPipelineBarrier(cb,
			vk.PipelineStageFlags(vk.PipelineStageComputeShaderBit|vk.PipelineStageTransferBit),
			vk.PipelineStageFlags(vk.PipelineStageComputeShaderBit|vk.PipelineStageTransferBit), 0,
			1, []vk.MemoryBarrier{{SType: vk.StructureTypeMemoryBarrier,
				SrcAccessMask: vk.AccessFlags(vk.AccessShaderWriteBit | vk.AccessTransferWriteBit),
				DstAccessMask: vk.AccessFlags(vk.AccessShaderReadBit | vk.AccessShaderWriteBit | vk.AccessTransferReadBit | vk.AccessTransferWriteBit)}},
			0, nil, 0, nil)
		pendW, pendR = pendW[:0], pendR[:0]
	}
	// hazard inserts a barrier when reads/writes conflict with pending work.
	hazard := func(reads, writes []span) {
		for _, r := range reads {
			if overlaps(pendW, r) {
				barrier()
				return
			}
		}
		for _, w := range writes {
			if overlaps(pendW, w) || overlaps(pendR, w) {
				barrier()
				return
			}
		}
	}
	launch := 0
	anyRead := false
	for i := range s.cmds {
		c := &s.cmds[i]
		switch c.kind {
		case cmdWrite:
			w := span{c.b, c.off, c.off + int64(len(c.host))}
			hazard(nil, []span{w})
			vk.CmdCopyBuffer(cb, s.stage.buf, c.b.buf, 1, []vk.BufferCopy{{SrcOffset: vk.DeviceSize(c.stOff), DstOffset: vk.DeviceSize(c.off), Size: vk.DeviceSize(len(c.host))}})
			pendW = append(pendW, w)
		case cmdRead:
			r := span{c.b, c.off, c.off + int64(len(c.host))}
			hazard([]span{r}, nil)
			vk.CmdCopyBuffer(cb, c.b.buf, s.stage.buf, 1, []vk.BufferCopy{{SrcOffset: vk.DeviceSize(c.off), DstOffset: vk.DeviceSize(c.stOff), Size: vk.DeviceSize(len(c.host))}})
			pendR = append(pendR, r)
			anyRead = true
		case cmdLaunch:
			if s.qpool != nil {
				vk.CmdWriteTimestamp(cb, vk.PipelineStageTopOfPipeBit, s.qpool, uint32(2*launch))
			}
			for _, x := range c.disps {
				hazard(x.reads, x.writes)
				set, err := s.descriptorSet(x)
				if err != nil {
					vk.EndCommandBuffer(cb)
					return err
				}
				vk.CmdBindPipeline(cb, vk.PipelineBindPointCompute, x.pipe.pl)
				vk.CmdBindDescriptorSets(cb, vk.PipelineBindPointCompute, x.pipe.lay.pl, 0, 1, []vk.DescriptorSet{set}, 0, nil)
				pb := pushBytes(x.push)
				vk.CmdPushConstants(cb, x.pipe.lay.pl, vk.ShaderStageFlags(vk.ShaderStageComputeBit), 0, uint32(len(pb)), unsafe.Pointer(&pb[0]))
				vk.CmdDispatch(cb, x.groups[0], x.groups[1], x.groups[2])
				pendR = append(pendR, x.reads...)
				pendW = append(pendW, x.writes...)
			}
			if s.qpool != nil {
				vk.CmdWriteTimestamp(cb, vk.PipelineStageBottomOfPipeBit, s.qpool, uint32(2*launch+1))
			}
			launch++
		}
	}
	if anyRead || len(pendW) > 0 {
		hostBarrier(cb)
	}
	if r := vk.EndCommandBuffer(cb); r != vk.Success {
		return d.resultErr("vkEndCommandBuffer", r)
	}
	s.recorded = true
	return nil
}

func (s *stream) descriptorSet(x dispatch) (vk.DescriptorSet, error) {
	var set vk.DescriptorSet
	if r := vk.AllocateDescriptorSets(s.d.dev, &vk.DescriptorSetAllocateInfo{
		SType: vk.StructureTypeDescriptorSetAllocateInfo, DescriptorPool: s.dpool,
		DescriptorSetCount: 1, PSetLayouts: []vk.DescriptorSetLayout{x.pipe.lay.dsl},
	}, &set); r != vk.Success {
		return set, s.d.resultErr("vkAllocateDescriptorSets", r)
	}
	writes := make([]vk.WriteDescriptorSet, len(x.binds))
	for i, b := range x.binds {
		if b.b == scratchBuf {
			b.b = s.scratch
		}
		writes[i] = vk.WriteDescriptorSet{
			SType: vk.StructureTypeWriteDescriptorSet, DstSet: set, DstBinding: uint32(i),
			DescriptorCount: 1, DescriptorType: vk.DescriptorTypeStorageBuffer,
			PBufferInfo: []vk.DescriptorBufferInfo{{Buffer: b.b.buf, Offset: vk.DeviceSize(b.off), Range: vk.DeviceSize(b.rng)}},
		}
	}
	vk.UpdateDescriptorSets(s.d.dev, uint32(len(writes)), writes, 0, nil)
	return set, nil
}

func (s *stream) Submit() error {
	defer noGC()()
	if err := s.usable(); err != nil {
		return err
	}
	if s.inflight {
		if err := s.Wait(); err != nil {
			return err
		}
	}
	for _, c := range s.cmds {
		if c.kind != cmdLaunch && c.b.freed {
			return fmt.Errorf("vulkan: stream uses a freed buffer: %w", rt.ErrClosed)
		}
		for _, x := range c.disps {
			for _, b := range x.binds {
				if b.b.freed {
					return fmt.Errorf("vulkan: stream uses a freed buffer: %w", rt.ErrClosed)
				}
			}
		}
	}
	if s.dirty || !s.recorded {
		if err := s.record(); err != nil {
			return err
		}
		s.dirty = false
	}
	if len(s.cmds) == 0 {
		return nil
	}
	if s.stage != nil {
		st := s.stage.bytes()
		for _, c := range s.cmds {
			if c.kind == cmdWrite {
				copy(st[c.stOff:], c.host)
			}
		}
	}
	d := s.d
	vk.ResetFences(d.dev, 1, []vk.Fence{s.fence})
	d.qmu.Lock()
	r := vk.QueueSubmit(d.queue, 1, []vk.SubmitInfo{{SType: vk.StructureTypeSubmitInfo, CommandBufferCount: 1, PCommandBuffers: []vk.CommandBuffer{s.cb}}}, s.fence)
	d.qmu.Unlock()
	if r != vk.Success {
		return d.resultErr("vkQueueSubmit", r)
	}
	s.inflight = true
	return d.valErr()
}

func (s *stream) Wait() error {
	defer noGC()()
	if !s.inflight {
		return nil
	}
	d := s.d
	if err := d.waitFence(s.fence); err != nil {
		if d.lost {
			s.inflight = false
		}
		return err
	}
	s.inflight = false
	if s.stage != nil {
		st := s.stage.bytes()
		for _, c := range s.cmds {
			if c.kind == cmdRead {
				copy(c.host, st[c.stOff:c.stOff+int64(len(c.host))])
			}
		}
	}
	if s.qpool != nil {
		res := make([]uint64, s.nq)
		r := vk.GetQueryPoolResults(d.dev, s.qpool, 0, s.nq, uint64(8*s.nq), unsafe.Pointer(&res[0]), 8,
			vk.QueryResultFlags(vk.QueryResult64Bit|vk.QueryResultWaitBit))
		if r == vk.Success {
			mask := ^uint64(0)
			if b := d.phys.tsBits; b < 64 {
				mask = (uint64(1) << b) - 1
			}
			period := float64(d.phys.limits.TimestampPeriod)
			s.timings = make([]time.Duration, s.nq/2)
			for i := range s.timings {
				dt := (res[2*i+1] - res[2*i]) & mask
				s.timings[i] = time.Duration(float64(dt) * period)
			}
		}
	}
	return d.valErr()
}

func (s *stream) Timings() []time.Duration {
	defer noGC()()
	return append([]time.Duration(nil), s.timings...)
}

func (s *stream) Close() error {
	defer noGC()()
	if s.closed {
		return nil
	}
	var err error
	if s.inflight {
		err = s.Wait()
		if err != nil && s.d.dev != nil {
			vk.DeviceWaitIdle(s.d.dev)
		}
	}
	s.closed = true
	d := s.d
	if d.dev != nil {
		s.freeRecording()
		s.freeScratch()
		vk.DestroyFence(d.dev, s.fence, nil)
		vk.DestroyCommandPool(d.dev, s.pool, nil)
	}
	d.mu.Lock()
	delete(d.streams, s)
	d.mu.Unlock()
	return err
}
