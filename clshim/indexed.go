//go:build cgo

package clshim

import (
	"fmt"

	"github.com/vrun-go/vrun/rt"
)

func (d *device) lowerGather(o *rt.Gather) (*launchSpec, error) {
	ni := o.Idx.Len()
	total := int64(o.Outer) * ni * int64(o.Inner)
	if total == 0 {
		return &launchSpec{}, nil
	}
	a, err := d.kernel(o, "raw.cl", "-DR="+rawType(o.X.DType.Size())+" "+rawDefs, "gather"+idxSuffix(o.Idx))
	if err != nil {
		return nil, err
	}
	a.i64(total)
	a.ref(d, o.X, o.Idx, o.Y)
	a.ints(o.Outer, o.Axis, o.Inner)
	a.i64(ni)
	a.indexStatus()
	return d.finish1D(a, total, d.cfg.ewLocal)
}

// indexedDefs specialises indexed.cl for dtype dt.
func indexedDefs(dt rt.DType) string {
	return fmt.Sprintf("%s -DR=%s -DIS_BOOL=%d", typeDefs(dt), rawType(dt.Size()), b01(dt == rt.Bool))
}

// idxSuffix is the kernel name suffix of an I32 or I64 index operand.
func idxSuffix(idx rt.Ref) string {
	if idx.DType == rt.I64 {
		return "64"
	}
	return "32"
}

func (d *device) lowerGatherElements(o *rt.GatherElements) (*launchSpec, error) {
	total := int64(o.Outer) * int64(o.N) * int64(o.Inner)
	if total == 0 {
		return &launchSpec{}, nil
	}
	a, err := d.kernel(o, "raw.cl", "-DR="+rawType(o.X.DType.Size())+" "+rawDefs, "gather_elements"+idxSuffix(o.Idx))
	if err != nil {
		return nil, err
	}
	a.i64(total)
	a.ref(d, o.X)
	a.view3(d, o.Idx)
	a.ref(d, o.Y)
	a.ints(o.Axis, o.N, o.Inner)
	a.indexStatus()
	return d.finish1D(a, total, d.cfg.ewLocal)
}

func (d *device) lowerScatterElements(o *rt.ScatterElements) (*launchSpec, error) {
	cols := int64(o.Outer) * int64(o.Inner)
	if cols == 0 || o.N == 0 || o.Axis == 0 {
		return &launchSpec{}, nil
	}
	a, err := d.kernel(o, "indexed.cl", indexedDefs(o.Y.DType), "scatter_elements"+idxSuffix(o.Idx))
	if err != nil {
		return nil, err
	}
	a.i64(cols)
	a.ref(d, o.Y)
	a.view3(d, o.Idx)
	a.view3(d, o.Upd)
	a.ints(o.Axis, o.N, o.Inner)
	a.i32(int(o.Fn))
	a.indexStatus()
	return d.finish1D(a, cols, d.cfg.ewLocal)
}

func (d *device) lowerTopK(o *rt.TopK) (*launchSpec, error) {
	total := int64(o.Outer) * int64(o.N) * int64(o.Inner)
	if total == 0 || o.K == 0 {
		return &launchSpec{}, nil
	}
	a, err := d.kernel(o, "indexed.cl", indexedDefs(o.X.DType), "topk")
	if err != nil {
		return nil, err
	}
	a.i64(total)
	a.ref(d, o.X, o.Values, o.Indices)
	a.ints(o.N, o.Inner, o.K)
	a.i32(b01(o.Largest))
	return d.finish1D(a, total, d.cfg.ewLocal)
}
