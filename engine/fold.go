package engine

import (
	"errors"
	"fmt"

	"github.com/vrun-go/vrun/rt"
)

// foldLimit is the most output elements a node may have to be evaluated
// at plan time. Folding covers the shape subgraphs that exporters emit
// (Shape→Gather→Concat→Reshape) and transposed or cast weights.
const foldLimit = 1 << 22

// foldBackend is the registered backend that evaluates constant nodes when
// Options.FoldDevice is nil.
const foldBackend = "cpu"

// folder hands out the device that evaluates constant nodes while one plan
// is built. A device it opened itself (through the rt registry) is opened on
// first use and closed by close; a device given in Options.FoldDevice
// belongs to the caller.
type folder struct {
	dev    rt.Device
	opened bool // dev was opened here and is closed by close
}

// device returns the fold device, opening the default one on first use.
func (f *folder) device() (rt.Device, error) {
	if f.dev != nil {
		return f.dev, nil
	}
	if _, ok := rt.Lookup(foldBackend); !ok {
		return nil, fmt.Errorf("constant folding: no fold device: set engine.Options.FoldDevice or register the %s backend (import _ \"github.com/vrun-go/vrun/cpu\")", foldBackend)
	}
	d, err := rt.Open(foldBackend, nil)
	if err != nil {
		return nil, fmt.Errorf("constant folding: %w", err)
	}
	f.dev, f.opened = d, true
	return d, nil
}

// close closes the fold device if the folder opened it.
func (f *folder) close() {
	if f.opened {
		f.dev.Close()
		f.dev, f.opened = nil, false
	}
}

// tryFold evaluates a lowered node on the fold device at plan time when
// every input is a constant, turning its outputs into constants. It reports
// whether it folded.
func (p *plan) tryFold(c *nodeCtx) (folded bool, err error) {
	if len(c.ops) == 0 {
		return false, nil
	}
	for _, t := range c.in {
		if t != nil && t.value == nil {
			return false, nil
		}
	}
	n := 0
	for _, t := range c.out {
		if t == nil {
			continue
		}
		if t.root != t || t.where != inArena {
			return false, nil
		}
		n += prod(t.shape)
	}
	if n > foldLimit {
		return false, nil
	}
	dev, err := p.fold.device()
	if err != nil {
		return false, err
	}
	bufs := map[*tensor]rt.Buffer{}
	defer func() {
		for _, b := range bufs {
			b.Free()
		}
	}()
	var ferr error
	bindRef := func(_ string, r *rt.Ref) {
		sl, ok := r.Buf.(slot)
		if !ok || ferr != nil {
			return
		}
		root := sl.t
		b, ok := bufs[root]
		if !ok {
			b, ferr = dev.Alloc(max(root.bytes(), 1))
			if ferr != nil {
				return
			}
			if root.value != nil {
				ferr = dev.Write(b, 0, root.value.Data)
			}
			bufs[root] = b
		}
		r.Buf = b
	}
	st, err := dev.NewStream(rt.StreamOptions{})
	if err != nil {
		return false, fmt.Errorf("constant folding: %w", err)
	}
	defer func() {
		if cerr := st.Close(); cerr != nil && err == nil {
			folded, err = false, fmt.Errorf("constant folding: %w", cerr)
		}
	}()
	for _, op := range c.ops {
		op = rt.CloneOp(op)
		rt.MapRefs(op, bindRef)
		if ferr != nil {
			return false, fmt.Errorf("constant folding: %w", ferr)
		}
		if err := st.Launch(op); err != nil {
			return false, fmt.Errorf("constant folding: %w", err)
		}
	}
	if err := st.Submit(); err != nil {
		return false, fmt.Errorf("constant folding: %w", err)
	}
	if err := st.Wait(); err != nil {
		var ie *rt.IndexError
		if errors.As(err, &ie) {
			ie.Node, ie.NodeOp = c.n.Name, c.n.Op
		}
		return false, fmt.Errorf("constant folding: %w", err)
	}
	for _, t := range c.out {
		if t == nil {
			continue
		}
		v := &rt.Tensor{DType: t.dtype, Shape: t.shape, Data: make([]byte, t.bytes())}
		if b, ok := bufs[t]; ok {
			if err := dev.Read(v.Data, b, 0); err != nil {
				return false, fmt.Errorf("constant folding: %w", err)
			}
		}
		t.value, t.where, t.used = v, inWeights, false
		t.act, t.conv = nil, nil // the producing op is gone
	}
	// Temporaries of a folded node need no arena space.
	for _, t := range p.tensors[len(p.m.Tensors):] {
		if t.first == c.step && t.value == nil && t.where == inArena {
			t.defined = false
		}
	}
	c.ops = nil
	return true, nil
}
