//go:build cgo && linux

package nccl

/*
#cgo LDFLAGS: -ldl
#define VR_DEFINE_TABLES
#include "nccl_shim.h"
*/
import "C"

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/vrun-go/vrun/dist"
	"github.com/vrun-go/vrun/rt"
)

// ncclNames are the entry points, in the order of nccl_shim.h's enum.
var ncclNames = []string{
	"ncclGetVersion", "ncclGetUniqueId", "ncclCommInitRank", "ncclCommInitAll", "ncclCommDestroy",
	"ncclAllReduce", "ncclGroupStart", "ncclGroupEnd", "ncclGetErrorString",
}

var (
	loadOnce sync.Once
	loadErr  error
	loadLib  string
)

func init() {
	if len(ncclNames) != int(C.VR_NCCL_COUNT) {
		panic("nccl: symbol table out of sync with nccl_shim.h")
	}
}

// load opens libnccl once and resolves every entry point.
func load() error {
	loadOnce.Do(func() {
		var h unsafe.Pointer
		for _, n := range LibNames {
			cn := C.CString(n)
			h = C.vr_nccl_open(cn)
			C.free(unsafe.Pointer(cn))
			if h != nil {
				loadLib = n
				break
			}
		}
		if h == nil {
			loadErr = fmt.Errorf("nccl: could not load %s: %w", strings.Join(LibNames, " or "), rt.ErrUnavailable)
			return
		}
		for i, n := range ncclNames {
			cn := C.CString(n)
			p := C.vr_nccl_sym(h, cn)
			C.free(unsafe.Pointer(cn))
			if p == nil {
				loadErr = fmt.Errorf("nccl: %s lacks %s (NCCL too old): %w", loadLib, n, rt.ErrUnavailable)
				return
			}
			C.vr_nccl_set(C.int(i), p)
		}
	})
	return loadErr
}

// check turns an ncclResult_t into an error.
func check(what string, r C.ncclResult_t) error {
	if r == 0 {
		return nil
	}
	return fmt.Errorf("nccl: %s: %s (ncclResult %d)", what, C.GoString(C.vr_ncclGetErrorString(r)), int(r))
}

// Available loads NCCL and reports why it cannot be used, if it cannot
// (an error wrapping rt.ErrUnavailable).
func Available() error { return load() }

// Version returns NCCL's version code (major×10000 + minor×100 + patch
// for 2.9 and later) and the library's file name.
func Version() (int, string, error) {
	if err := load(); err != nil {
		return 0, "", err
	}
	var v C.int
	if err := check("ncclGetVersion", C.vr_ncclGetVersion(&v)); err != nil {
		return 0, "", err
	}
	return int(v), loadLib, nil
}

// GetUniqueID creates the id of a new communicator (rank 0 calls it).
func GetUniqueID() (UniqueID, error) {
	var id UniqueID
	if err := load(); err != nil {
		return id, err
	}
	var u C.ncclUniqueId
	if err := check("ncclGetUniqueId", C.vr_ncclGetUniqueId(&u)); err != nil {
		return id, err
	}
	copy(id[:], C.GoBytes(unsafe.Pointer(&u.internal[0]), IDBytes))
	return id, nil
}

// Comm is one rank of a communicator.
type Comm struct {
	c            C.ncclComm_t
	rank, nranks int
}

// Rank and Size are the communicator's rank of c and its rank count.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.nranks }

// InitAll creates one communicator over the CUDA devices devs (ordinals)
// of this process, one Comm per device, in order (ncclCommInitAll).
func InitAll(devs []int) ([]*Comm, error) {
	if err := load(); err != nil {
		return nil, err
	}
	if len(devs) == 0 {
		return nil, fmt.Errorf("nccl: InitAll: no devices")
	}
	comms := make([]C.ncclComm_t, len(devs))
	cd := make([]C.int, len(devs))
	for i, d := range devs {
		cd[i] = C.int(d)
	}
	if err := check("ncclCommInitAll", C.vr_ncclCommInitAll(&comms[0], C.int(len(devs)), &cd[0])); err != nil {
		return nil, err
	}
	out := make([]*Comm, len(devs))
	for i, c := range comms {
		out[i] = &Comm{c: c, rank: i, nranks: len(devs)}
	}
	return out, nil
}

// InitRank joins rank of an nranks communicator identified by id
// (ncclCommInitRank). The CUDA context of the rank's device must be
// current on the calling thread. It blocks until every rank has joined.
func InitRank(nranks int, id UniqueID, rank int) (*Comm, error) {
	if err := load(); err != nil {
		return nil, err
	}
	if nranks <= 0 || rank < 0 || rank >= nranks {
		return nil, fmt.Errorf("nccl: InitRank: rank %d of %d", rank, nranks)
	}
	var c C.ncclComm_t
	if err := check("ncclCommInitRank", C.vr_ncclCommInitRank(&c, C.int(nranks), (*C.char)(unsafe.Pointer(&id[0])), C.int(rank))); err != nil {
		return nil, err
	}
	return &Comm{c: c, rank: rank, nranks: nranks}, nil
}

// AllReduce enqueues an all-reduce of count elements of dtype dt from
// device address send into recv (they may be equal: in place) on the CUDA
// stream (a CUstream; 0 is the legacy default stream). It returns once
// enqueued; the stream orders it with the kernels around it.
func (c *Comm) AllReduce(send, recv uintptr, count int, dt rt.DType, op dist.ReduceOp, stream uintptr) error {
	t, err := dataType(dt)
	if err != nil {
		return err
	}
	o, err := redOp(op)
	if err != nil {
		return err
	}
	return check("ncclAllReduce", C.vr_ncclAllReduce(C.ulonglong(send), C.ulonglong(recv), C.size_t(count),
		C.ncclDataType_t(t), C.ncclRedOp_t(o), c.c, C.ulonglong(stream)))
}

// GroupStart begins a group of calls (one per rank of a process, or one
// per bucket) that NCCL launches together at GroupEnd.
func GroupStart() error {
	if err := load(); err != nil {
		return err
	}
	return check("ncclGroupStart", C.vr_ncclGroupStart())
}

// GroupEnd ends a group begun by GroupStart.
func GroupEnd() error {
	if err := load(); err != nil {
		return err
	}
	return check("ncclGroupEnd", C.vr_ncclGroupEnd())
}

// Destroy frees the communicator. It is safe to call more than once.
func (c *Comm) Destroy() error {
	if c.c == nil {
		return nil
	}
	err := check("ncclCommDestroy", C.vr_ncclCommDestroy(c.c))
	c.c = nil
	return err
}
