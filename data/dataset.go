package data

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

// Dataset is an in-memory set of (x, y) samples: sample i is X[i] and
// Y[i], the slices of X and Y along their first dim.
type Dataset struct {
	// X holds the inputs, [N, ...]: U8 images as read from MNIST or
	// CIFAR, or any numeric dtype.
	X *rt.Tensor
	// Y holds the targets, [N, ...]: I64 class indices for the image
	// readers, or any numeric dtype.
	Y *rt.Tensor
	// Classes is the number of classes when Y holds class indices (10 for
	// MNIST), 0 when unknown or when Y is not a class index.
	Classes int
}

// NewDataset checks that x and y hold the same number of samples (and,
// when classes > 0, that y holds integer class indices in [0, classes)),
// and returns them as a dataset. The tensors are not copied.
func NewDataset(x, y *rt.Tensor, classes int) (*Dataset, error) {
	d := &Dataset{X: x, Y: y}
	if err := d.check(); err != nil {
		return nil, err
	}
	if classes > 0 {
		if err := d.CheckLabels(classes); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func (d *Dataset) check() error {
	if d.X == nil || d.Y == nil {
		return errors.New("data: dataset needs both x and y")
	}
	for _, t := range []struct {
		name string
		t    *rt.Tensor
	}{{"x", d.X}, {"y", d.Y}} {
		if err := t.t.Check(); err != nil {
			return fmt.Errorf("data: %s: %w", t.name, err)
		}
		if len(t.t.Shape) == 0 {
			return fmt.Errorf("data: %s is a scalar; want samples along the first dim", t.name)
		}
	}
	if d.X.Shape[0] != d.Y.Shape[0] {
		return fmt.Errorf("data: x has %d samples but y has %d (shapes %v and %v)", d.X.Shape[0], d.Y.Shape[0], d.X.Shape, d.Y.Shape)
	}
	return nil
}

// CheckLabels checks that Y holds integer class indices in [0, classes)
// and sets Classes. The error names the first bad sample.
func (d *Dataset) CheckLabels(classes int) error {
	if err := d.check(); err != nil {
		return err
	}
	if classes <= 0 {
		return fmt.Errorf("data: %d classes", classes)
	}
	if !d.Y.DType.IsInt() {
		return fmt.Errorf("data: y has dtype %s; class labels must be integers", d.Y.DType)
	}
	per := d.Y.Len() / max(d.Y.Shape[0], 1)
	for i := range d.Y.Len() {
		if v := d.Y.Float64(i); v < 0 || v >= float64(classes) {
			return fmt.Errorf("data: label %v of sample %d is out of range [0, %d)", v, i/max(per, 1), classes)
		}
	}
	d.Classes = classes
	return nil
}

// Len is the number of samples.
func (d *Dataset) Len() int { return d.X.Shape[0] }

// rowBytes is the size of one sample of t.
func rowBytes(t *rt.Tensor) int {
	if t.Shape[0] == 0 {
		return 0
	}
	return len(t.Data) / t.Shape[0]
}

// Head returns the first n samples of d (d itself when it has no more).
func (d *Dataset) Head(n int) (*Dataset, error) {
	if n >= d.Len() {
		return d, nil
	}
	idx := make([]int, max(n, 0))
	for i := range idx {
		idx[i] = i
	}
	return d.Subset(idx)
}

// Subset returns the samples idx, in that order, as a new dataset (the
// data is copied).
func (d *Dataset) Subset(idx []int) (*Dataset, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	n := d.Len()
	for _, i := range idx {
		if i < 0 || i >= n {
			return nil, fmt.Errorf("data: subset index %d out of range [0, %d)", i, n)
		}
	}
	take := func(t *rt.Tensor) *rt.Tensor {
		rb := rowBytes(t)
		out := &rt.Tensor{DType: t.DType, Shape: append([]int{len(idx)}, t.Shape[1:]...), Data: make([]byte, len(idx)*rb)}
		for k, i := range idx {
			copy(out.Data[k*rb:(k+1)*rb], t.Data[i*rb:(i+1)*rb])
		}
		return out
	}
	return &Dataset{X: take(d.X), Y: take(d.Y), Classes: d.Classes}, nil
}

// Split divides the dataset at random into a training and a validation
// set: valFraction of the samples (rounded to the nearest integer) go to
// val, the rest to train. The same seed gives the same split. Both are
// copies.
func (d *Dataset) Split(valFraction float64, seed uint64) (train, val *Dataset, err error) {
	if !(valFraction >= 0 && valFraction <= 1) {
		return nil, nil, fmt.Errorf("data: validation fraction %g is not in [0, 1]", valFraction)
	}
	if err := d.check(); err != nil {
		return nil, nil, err
	}
	n := d.Len()
	nv := int(math.Round(valFraction * float64(n)))
	perm := rand.New(rand.NewPCG(seed, streamSplit)).Perm(n)
	if train, err = d.Subset(perm[:n-nv]); err != nil {
		return nil, nil, err
	}
	if val, err = d.Subset(perm[n-nv:]); err != nil {
		return nil, nil, err
	}
	return train, val, nil
}

// ReadNPY reads a dataset from two .npy files: the inputs and the
// targets, with the same first dim.
func ReadNPY(xPath, yPath string) (*Dataset, error) {
	x, err := npy.ReadFile(xPath)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	y, err := npy.ReadFile(yPath)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	d, err := NewDataset(x, y, 0)
	if err != nil {
		return nil, fmt.Errorf("%w (%s, %s)", err, xPath, yPath)
	}
	return d, nil
}

// ReadNPZ reads a dataset from a .npz archive (numpy.savez): the arrays
// named xName and yName, by default "x" and "y", or, when the archive has
// neither, the positional "arr_0" and "arr_1".
func ReadNPZ(path, xName, yName string) (*Dataset, error) {
	arrays, err := npy.ReadNPZFile(path)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	if xName == "" && yName == "" {
		xName, yName = "x", "y"
		if arrays["x"] == nil && arrays["y"] == nil {
			xName, yName = "arr_0", "arr_1"
		}
	}
	x, y := arrays[xName], arrays[yName]
	if x == nil || y == nil {
		names := slices.Sorted(maps.Keys(arrays))
		return nil, fmt.Errorf("data: %s: want arrays %q and %q, the archive has %q", path, xName, yName, names)
	}
	d, err := NewDataset(x, y, 0)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	return d, nil
}
