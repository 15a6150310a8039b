// Package nccl is the CUDA path of data parallelism: NCCL, NVIDIA's
// collective library, opened at run time (libnccl.so.2, through our own
// declarations in nccl_shim.h, like cudashim opens libcuda), with
//
//   - one communicator over the GPUs of one process (InitAll,
//     ncclCommInitAll) or one rank per process (InitRank,
//     ncclCommInitRank);
//   - AllReduce of a device buffer on a CUDA stream (ncclAllReduce), one
//     call per gradient bucket (dist.BucketsByParam plans them) inside
//     Group/GroupEnd;
//   - a TCP bootstrap for several machines: rank 0 creates the unique id
//     (ncclGetUniqueId) and serves it (ServeID); every other rank fetches
//     it (FetchID) before ncclCommInitRank. NCCL then sets up its own
//     transports (NVLink, InfiniBand, sockets).
//
// The data-parallel trainer (engine.NewDataParallel) uses it on CUDA
// devices: InitAll over the listed GPUs, or InitRank after Bootstrap for
// one rank per process (engine.TrainOptions.NCCL), and one ncclAvg
// all-reduce per gradient bucket, in one group, on each device's CUstream
// after its backward pass (see docs/training.md, "NCCL").
//
// Without cgo, or off Linux, every call reports rt.ErrUnavailable.
package nccl
