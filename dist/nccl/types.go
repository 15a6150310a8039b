package nccl

import (
	"fmt"

	"github.com/vrun-go/vrun/dist"
	"github.com/vrun-go/vrun/rt"
)

// IDBytes is the size of an NCCL unique id (NCCL_UNIQUE_ID_BYTES).
const IDBytes = 128

// UniqueID identifies one communicator: rank 0 creates it
// (GetUniqueID) and every rank passes it to InitRank.
type UniqueID [IDBytes]byte

// LibNames are the library names tried, in order.
var LibNames = []string{"libnccl.so.2", "libnccl.so"}

// dataType maps a dtype to ncclDataType_t.
func dataType(dt rt.DType) (int, error) {
	switch dt {
	case rt.I32:
		return 2, nil // ncclInt32
	case rt.I64:
		return 4, nil // ncclInt64
	case rt.F16:
		return 6, nil // ncclFloat16
	case rt.F32:
		return 7, nil // ncclFloat32
	case rt.F64:
		return 8, nil // ncclFloat64
	}
	return 0, fmt.Errorf("nccl: dtype %s has no NCCL type", dt)
}

// redOp maps a reduction to ncclRedOp_t. Mean is ncclAvg (NCCL 2.10 and
// later): the plain mean over ranks. A mean weighted by shard size is a
// Sum of gradients each scaled by its weight beforehand.
func redOp(op dist.ReduceOp) (int, error) {
	switch op {
	case dist.Sum:
		return 0, nil // ncclSum
	case dist.Mean:
		return 4, nil // ncclAvg
	}
	return 0, fmt.Errorf("nccl: reduction %v has no NCCL op", op)
}
