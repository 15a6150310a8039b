//go:build !cgo || !linux

package nccl

import (
	"fmt"

	"github.com/vrun-go/vrun/dist"
	"github.com/vrun-go/vrun/rt"
)

var errNoCgo = fmt.Errorf("nccl: needs cgo on Linux: %w", rt.ErrUnavailable)

// Available reports that NCCL needs cgo on Linux.
func Available() error { return errNoCgo }

// Version reports that NCCL needs cgo on Linux.
func Version() (int, string, error) { return 0, "", errNoCgo }

// GetUniqueID reports that NCCL needs cgo on Linux.
func GetUniqueID() (UniqueID, error) { return UniqueID{}, errNoCgo }

// Comm is one rank of a communicator.
type Comm struct{ rank, nranks int }

// Rank is the communicator's rank of c.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.nranks }

// InitAll reports that NCCL needs cgo on Linux.
func InitAll([]int) ([]*Comm, error) { return nil, errNoCgo }

// InitRank reports that NCCL needs cgo on Linux.
func InitRank(int, UniqueID, int) (*Comm, error) { return nil, errNoCgo }

// AllReduce reports that NCCL needs cgo on Linux.
func (c *Comm) AllReduce(send, recv uintptr, count int, dt rt.DType, op dist.ReduceOp, stream uintptr) error {
	return errNoCgo
}

// GroupStart reports that NCCL needs cgo on Linux.
func GroupStart() error { return errNoCgo }

// GroupEnd reports that NCCL needs cgo on Linux.
func GroupEnd() error { return errNoCgo }

// Destroy does nothing.
func (c *Comm) Destroy() error { return nil }
