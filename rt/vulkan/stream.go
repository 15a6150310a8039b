//go:build cgo

package vulkan

import (
	"fmt"
	"os"
	"strings"
	"time"
	"unsafe"

	vk "github.com/goki/vulkan"
	"github.com/vrun-go/vrun/rt"
)

// command is one recorded stream command.
type command struct {
	kind  rt.StreamCmd
	b     *buffer
	off   int64
	host  []byte // Write source / Read destination
	stOff int64  // offset in the stream's staging buffer
	// pin is the AllocHost buffer that holds host (at pinOff), which the
	// command copies from or to directly, without staging; or nil.
	pin    *buffer
	pinOff int64
	disps  []dispatch
}

// stream records commands Go-side; the first Submit after a change records
// them into one VkCommandBuffer, which later Submits replay.
type stream struct {
	d       *device
	profile bool
	cmds    []command
	nLaunch int
	dirty   bool

	pool     uint64         // VkCommandPool
	cb       unsafe.Pointer // VkCommandBuffer
	fence    uint64         // VkFence
	dpool    uint64         // VkDescriptorPool of the recording
	stage    *buffer
	qpool    uint64 // VkQueryPool of the recording
	nq       uint32
	recorded bool
	barriers int // between dispatches in the recording (tests)

	inflight bool
	times    rt.LaunchTimes // of the last Submit, with profile
	closed   bool

	// scratch is the split-K scratch buffer (bound where a dispatch binds
	// scratchBuf), allocated by Launch to the largest size any recorded
	// op needs; outgrown ones wait in retired until no recording uses
	// them. Freed on Reset and Close.
	scratch *buffer
	retired []*buffer
	// nScratch counts the launches that bind the scratch buffer; launch
	// k takes slot k % scratchSlots of it, so that split-K ops of
	// independent branches (a fire module's two expands) can run
	// between the same two barriers.
	nScratch int

	// status holds the rt.IndexStatusWords that checked Gather,
	// GatherElements and ScatterElements kernels flag an out-of-range
	// index in (statusBuf in their binds), allocated by the first Launch
	// that binds it. usesStatus says whether the recording binds it: the
	// command buffer first copies zeros into it from the staging buffer
	// (at statusOff, which Submit zeroes) and at its end copies it back
	// to the staging buffer (at statusOff+statusBytes); Wait decodes that
	// with ops, the op names of the launches.
	status     *buffer
	usesStatus bool
	statusOff  int64
	ops        []string
}

// statusBytes is the size of a stream's index status words.
const statusBytes = 4 * rt.IndexStatusWords

func (d *device) NewStream(opts rt.StreamOptions) (rt.Stream, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	s := &stream{d: d, profile: opts.Profile && d.phys.tsBits > 0, dirty: true}
	vd := d.vd
	pool, r := vd.createCommandPool(uint32(d.phys.qfam))
	if r != vk.Success {
		return nil, d.resultErr("vkCreateCommandPool", r)
	}
	s.pool = pool
	cb, r := vd.allocateCommandBuffer(pool)
	if r != vk.Success {
		vd.destroyCommandPool(pool)
		return nil, d.resultErr("vkAllocateCommandBuffers", r)
	}
	s.cb = cb
	fence, r := vd.createFence()
	if r != vk.Success {
		vd.destroyCommandPool(pool)
		return nil, d.resultErr("vkCreateFence", r)
	}
	s.fence = fence
	ownHandle(d.valID, uint64(uintptr(cb)))
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
	if err := rt.CheckRange(b.size, off, int64(len(src))); err != nil {
		return fmt.Errorf("vulkan: Stream.Write: %w", err)
	}
	if len(src) == 0 {
		return nil
	}
	pin, pinOff := s.d.hostOf(src)
	s.cmds = append(s.cmds, command{kind: rt.CmdWrite, b: b, off: off, host: src, pin: pin, pinOff: pinOff})
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
	if err := rt.CheckRange(b.size, off, int64(len(dst))); err != nil {
		return fmt.Errorf("vulkan: Stream.Read: %w", err)
	}
	if len(dst) == 0 {
		return nil
	}
	pin, pinOff := s.d.hostOf(dst)
	s.cmds = append(s.cmds, command{kind: rt.CmdRead, b: b, off: off, host: dst, pin: pin, pinOff: pinOff})
	s.dirty = true
	return nil
}

func (s *stream) Launch(op rt.Op) error {
	if err := s.usable(); err != nil {
		return err
	}
	ds, err := s.d.lower(op)
	if err != nil {
		return err
	}
	return s.launch(op, ds)
}

// launch appends op, lowered to ds, to the stream.
func (s *stream) launch(op rt.Op, ds []dispatch) error {
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
	if scratchSlot(ds, s.nScratch%scratchSlots) {
		s.nScratch++
	}
	for i := range ds {
		if ds[i].tagAt == 0 {
			continue
		}
		if s.status == nil {
			b, err := s.d.newBuffer(statusBytes, s.d.bufType, false)
			if err != nil {
				return fmt.Errorf("%s: %w", op.OpName(), err)
			}
			s.status = b
		}
		s.usesStatus = true
		if rt.IndexChecked(op) {
			ds[i].push[ds[i].tagAt] = uint32(s.nLaunch + 1)
		}
	}
	s.cmds = append(s.cmds, command{kind: rt.CmdLaunch, disps: ds})
	s.ops = append(s.ops, op.OpName())
	s.nLaunch++
	s.dirty = true
	return nil
}

// scratchSlots is the number of slots of a stream's scratch buffer.
const scratchSlots = 2

// slotShift places a scratch slot's spans apart from every other slot's
// (span offsets slot<<slotShift on): the stride of the slots in the
// buffer is known only when the stream records.
const slotShift = 40

// scratchSlot moves the dispatches of ds that bind the scratch buffer to
// the given slot, and says whether there were any.
func scratchSlot(ds []dispatch, slot int) bool {
	used := false
	for i := range ds {
		x := &ds[i]
		if x.scratch == 0 {
			continue
		}
		used = true
		x.slot = slot
		for _, sp := range [][]span{x.reads, x.writes} {
			for j := range sp {
				if sp[j].b == scratchBuf {
					sp[j].lo += int64(slot) << slotShift
					sp[j].hi += int64(slot) << slotShift
				}
			}
		}
	}
	return used
}

// scratchStride is the distance in bytes between the slots of the
// scratch buffer.
func (s *stream) scratchStride() int64 {
	if s.scratch == nil {
		return 0
	}
	return s.scratch.size / scratchSlots
}

// ensureScratch grows the scratch buffer to what ds need in each of its
// slots. The old buffer may still be used by a submitted recording: it is
// released once the stream re-records, resets or closes.
func (s *stream) ensureScratch(ds []dispatch) error {
	var need int64
	for _, x := range ds {
		need = max(need, x.scratch)
	}
	if need == 0 || s.scratchStride() >= need {
		return nil
	}
	align := max(s.d.minAlign, 256)
	need = (need + align - 1) / align * align
	b, err := s.d.newBuffer(scratchSlots*need, s.d.bufType, false)
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
	if s.inflight {
		s.Wait()
	}
	if !s.inflight && !s.closed && s.d.vd.p != nil {
		s.freeRecording()
		s.freeScratch()
	}
	s.cmds = nil
	s.nLaunch = 0
	s.nScratch = 0
	s.ops = nil
	s.usesStatus = false
	s.times.Set(nil)
	s.dirty = true
}

// freeRecording releases the objects of the last recording.
func (s *stream) freeRecording() {
	vd := s.d.vd
	if s.dpool != 0 {
		vd.destroyDescriptorPool(s.dpool)
		s.dpool = 0
	}
	if s.qpool != 0 {
		vd.destroyQueryPool(s.qpool)
		s.qpool = 0
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

// levelWindow bounds the dispatches levelOrder orders together (its cost
// grows with the square of their number).
const levelWindow = 512

// reorderOff reports whether VRUN_VK_REORDER=0 keeps a recording's
// dispatches in launch order (to measure what levelOrder gains).
func reorderOff() bool { return strings.TrimSpace(os.Getenv("VRUN_VK_REORDER")) == "0" }

// levelOrder orders a run of dispatches by level, so that each barrier
// the recording needs separates as many of them as it can: a dispatch's
// level is one more than the highest level of the earlier dispatches it
// conflicts with (it reads what they write, or writes what they read or
// write), or 0. Dispatches of one level conflict with none of each other,
// and a dispatch comes after every earlier one it conflicts with, so the
// order computes what launch order does; the recording's hazard tracking
// then puts a barrier between levels. A fire module's two expand
// convolutions, or a residual block's shortcut, share their levels.
// Windows of levelWindow dispatches are ordered one after the other.
func levelOrder(xs []*dispatch) []*dispatch {
	if reorderOff() {
		return xs
	}
	out := make([]*dispatch, 0, len(xs))
	level := make([]int, levelWindow)
	for lo := 0; lo < len(xs); lo += levelWindow {
		w := xs[lo:min(lo+levelWindow, len(xs))]
		top := 0
		for i, x := range w {
			level[i] = 0
			for j := range i {
				if level[j] >= level[i] && conflict(w[j], x) {
					level[i] = level[j] + 1
				}
			}
			top = max(top, level[i])
		}
		for l := 0; l <= top; l++ {
			for i, x := range w {
				if level[i] == l {
					out = append(out, x)
				}
			}
		}
	}
	return out
}

// conflict says whether b, issued after a, must wait for a.
func conflict(a, b *dispatch) bool {
	for _, w := range a.writes {
		if overlaps(b.reads, w) || overlaps(b.writes, w) {
			return true
		}
	}
	for _, r := range a.reads {
		if overlaps(b.writes, r) {
			return true
		}
	}
	return false
}

// record builds the command buffer from the command list.
func (s *stream) record() error {
	d := s.d
	vd := d.vd
	s.freeRecording()
	vd.resetCommandBuffer(s.cb)

	var stageSize int64
	var nsets, nbinds int
	for i := range s.cmds {
		c := &s.cmds[i]
		switch c.kind {
		case rt.CmdWrite, rt.CmdRead:
			if c.pin != nil {
				continue
			}
			c.stOff = stageSize
			stageSize += (int64(len(c.host)) + 15) &^ 15
		case rt.CmdLaunch:
			for _, x := range c.disps {
				nsets++
				nbinds += len(x.binds)
			}
		}
	}
	if s.usesStatus {
		s.statusOff = stageSize
		stageSize += 2 * statusBytes
	}
	if stageSize > 0 {
		st, err := d.newBuffer(stageSize, d.stageType, true)
		if err != nil {
			return err
		}
		s.stage = st
	}
	if nsets > 0 {
		dp, r := vd.createDescriptorPool(uint32(nsets), uint32(max(nbinds, 1)))
		if r != vk.Success {
			return d.resultErr("vkCreateDescriptorPool", r)
		}
		s.dpool = dp
	}
	s.nq = 0
	if s.profile && s.nLaunch > 0 {
		s.nq = uint32(2 * s.nLaunch)
		qp, r := vd.createQueryPool(s.nq)
		if r != vk.Success {
			return d.resultErr("vkCreateQueryPool", r)
		}
		s.qpool = qp
	}

	cb := s.cb
	if r := vd.beginCommandBuffer(cb, 0); r != vk.Success {
		return d.resultErr("vkBeginCommandBuffer", r)
	}
	if s.qpool != 0 {
		vd.cmdResetQueryPool(cb, s.qpool, s.nq)
	}
	var pendW, pendR []span
	const stages = vk.PipelineStageComputeShaderBit | vk.PipelineStageTransferBit
	s.barriers = 0
	barrier := func() {
		s.barriers++
		vd.cmdBarrier(cb, stages, stages,
			vk.AccessShaderWriteBit|vk.AccessTransferWriteBit,
			vk.AccessShaderReadBit|vk.AccessShaderWriteBit|vk.AccessTransferReadBit|vk.AccessTransferWriteBit)
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
	if s.usesStatus {
		vd.cmdCopyBuffer(cb, s.stage.buf, s.status.buf, s.statusOff, 0, statusBytes)
		barrier()
	}
	launch := 0
	anyRead := false
	for i := range s.cmds {
		c := &s.cmds[i]
		switch c.kind {
		case rt.CmdWrite:
			w := span{c.b, c.off, c.off + int64(len(c.host))}
			hazard(nil, []span{w})
			if c.pin != nil {
				vd.cmdCopyBuffer(cb, c.pin.buf, c.b.buf, c.pinOff, c.off, int64(len(c.host)))
			} else {
				vd.cmdCopyBuffer(cb, s.stage.buf, c.b.buf, c.stOff, c.off, int64(len(c.host)))
			}
			pendW = append(pendW, w)
		case rt.CmdRead:
			r := span{c.b, c.off, c.off + int64(len(c.host))}
			hazard([]span{r}, nil)
			if c.pin != nil {
				vd.cmdCopyBuffer(cb, c.b.buf, c.pin.buf, c.off, c.pinOff, int64(len(c.host)))
			} else {
				vd.cmdCopyBuffer(cb, c.b.buf, s.stage.buf, c.off, c.stOff, int64(len(c.host)))
			}
			pendR = append(pendR, r)
			anyRead = true
		case rt.CmdLaunch:
			var xs []*dispatch
			if s.qpool != 0 {
				// timed launch by launch: in order
				vd.cmdWriteTimestamp(cb, vk.PipelineStageTopOfPipeBit, s.qpool, uint32(2*launch))
				for k := range c.disps {
					xs = append(xs, &c.disps[k])
				}
			} else if i == 0 || s.cmds[i-1].kind != rt.CmdLaunch {
				// the first of a run of launches issues the run's dispatches
				j := i
				for j < len(s.cmds) && s.cmds[j].kind == rt.CmdLaunch {
					for k := range s.cmds[j].disps {
						xs = append(xs, &s.cmds[j].disps[k])
					}
					j++
				}
				xs = levelOrder(xs)
			}
			for _, x := range xs {
				hazard(x.reads, x.writes)
				set, err := s.descriptorSet(*x)
				if err != nil {
					vd.endCommandBuffer(cb)
					return err
				}
				vd.cmdDispatch(cb, x.pipe.pl, x.pipe.lay.pl, set, pushBytes(x.push), x.groups)
				pendR = append(pendR, x.reads...)
				pendW = append(pendW, x.writes...)
			}
			if s.qpool != 0 {
				vd.cmdWriteTimestamp(cb, vk.PipelineStageBottomOfPipeBit, s.qpool, uint32(2*launch+1))
			}
			launch++
		}
	}
	if s.usesStatus {
		barrier()
		vd.cmdCopyBuffer(cb, s.status.buf, s.stage.buf, 0, s.statusOff+statusBytes, statusBytes)
		anyRead = true
	}
	if anyRead || len(pendW) > 0 {
		hostBarrier(vd, cb)
	}
	if r := vd.endCommandBuffer(cb); r != vk.Success {
		return d.resultErr("vkEndCommandBuffer", r)
	}
	s.recorded = true
	return nil
}

// descriptorSet allocates x's descriptor set from the recording's pool.
func (s *stream) descriptorSet(x dispatch) (uint64, error) {
	bufs := make([]bufRange, len(x.binds))
	for i, b := range x.binds {
		if b.b == scratchBuf {
			b.b = s.scratch
			b.off += int64(x.slot) * s.scratchStride()
		}
		if b.b == statusBuf {
			b.b = s.status
		}
		bufs[i] = bufRange{buf: b.b.buf, off: uint64(b.off), rng: uint64(b.rng)}
	}
	set, r := s.d.vd.writeSet(s.dpool, x.pipe.lay.dsl, bufs)
	if r != vk.Success {
		return 0, s.d.resultErr("vkAllocateDescriptorSets", r)
	}
	return set, nil
}

func (s *stream) Submit() error {
	if err := s.usable(); err != nil {
		return err
	}
	if s.inflight {
		if err := s.Wait(); err != nil {
			return err
		}
	}
	for _, c := range s.cmds {
		if c.kind != rt.CmdLaunch && (c.b.freed || c.pin != nil && c.pin.freed) {
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
			if c.kind == rt.CmdWrite && c.pin == nil {
				copy(st[c.stOff:], c.host)
			}
		}
		if s.usesStatus {
			clear(st[s.statusOff : s.statusOff+statusBytes])
		}
	}
	d := s.d
	d.vd.resetFence(s.fence)
	d.qmu.Lock()
	r := d.vd.submit(s.cb, s.fence)
	d.qmu.Unlock()
	if r != vk.Success {
		return d.resultErr("vkQueueSubmit", r)
	}
	s.inflight = true
	return d.valErr()
}

func (s *stream) Wait() error {
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
			if c.kind == rt.CmdRead && c.pin == nil {
				copy(c.host, st[c.stOff:c.stOff+int64(len(c.host))])
			}
		}
	}
	var idxErr error
	if s.usesStatus && s.stage != nil {
		idxErr = rt.IndexStatusError(backendName, s.stage.bytes()[s.statusOff+statusBytes:], s.ops)
	}
	if s.qpool != 0 {
		res := make([]uint64, s.nq)
		if r := d.vd.queryResults(s.qpool, res); r == vk.Success {
			mask := ^uint64(0)
			if b := d.phys.tsBits; b < 64 {
				mask = (uint64(1) << b) - 1
			}
			period := float64(d.phys.limits.TimestampPeriod)
			times := make([]time.Duration, s.nq/2)
			for i := range times {
				dt := (res[2*i+1] - res[2*i]) & mask
				times[i] = time.Duration(float64(dt) * period)
			}
			s.times.Set(times)
		}
	}
	if err := d.valErr(); err != nil {
		return err
	}
	return idxErr
}

func (s *stream) Timings() []time.Duration { return s.times.Get() }

func (s *stream) Close() error {
	if s.closed {
		return nil
	}
	var err error
	if s.inflight {
		err = s.Wait()
		if err != nil && s.d.vd.p != nil {
			s.d.vd.waitIdle()
		}
	}
	s.closed = true
	d := s.d
	if d.vd.p != nil {
		s.freeRecording()
		s.freeScratch()
		if s.status != nil {
			s.status.release()
			s.status = nil
		}
		d.vd.destroyFence(s.fence)
		d.vd.destroyCommandPool(s.pool)
		ownHandle(0, uint64(uintptr(s.cb)))
		s.cb = nil
	}
	d.mu.Lock()
	delete(d.streams, s)
	d.mu.Unlock()
	return err
}
