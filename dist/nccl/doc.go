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
// Status: the shim builds (cgo, Linux) and the parts that need no GPU —
// the bootstrap protocol, the launch configuration, bucket planning — are
// tested. Nothing that calls NCCL has run on hardware: this session had
// no GPU. The data-parallel trainer (engine.NewDataParallel) reduces
// through host memory on every backend, CUDA included; wiring these calls
// into the CUDA backend's recorded stream waits for a machine with two
// GPUs (see docs/training.md, "NCCL").
//
// Without cgo, or off Linux, every call reports rt.ErrUnavailable.
package nccl
