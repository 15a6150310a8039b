package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vrun-go/vrun/dist"
	"github.com/vrun-go/vrun/dist/nccl"
	"github.com/vrun-go/vrun/rt"
)

// ncclMinVersion is the first NCCL with ncclAvg (2.10.0).
const ncclMinVersion = 21000

// ncclGroup is the NCCL communicator of a data-parallel group of CUDA
// devices: one rank per device, in device order (ncclCommInitAll).
type ncclGroup struct {
	comms []*nccl.Comm
}

// destroy frees the communicator.
func (g *ncclGroup) destroy() error {
	var errs []error
	for _, c := range g.comms {
		errs = append(errs, c.Destroy())
	}
	return errors.Join(errs...)
}

// ncclUnusable says why NCCL cannot all-reduce over devs, or returns nil
// and the CUDA ordinals of the devices.
func ncclUnusable(devs []rt.Device) ([]int, error) {
	var ords []int
	for _, d := range devs {
		info := d.Info()
		if info.Backend != "cuda" {
			return nil, fmt.Errorf("device %s is not a CUDA device", info.Spec())
		}
		for j, o := range ords {
			if o == info.Physical {
				return nil, fmt.Errorf("devices %s and %s are one GPU (NCCL refuses two ranks on one GPU)", devs[j].Info().Spec(), info.Spec())
			}
		}
		ords = append(ords, info.Physical)
	}
	v, lib, err := nccl.Version()
	if err != nil {
		return nil, err
	}
	if v < ncclMinVersion {
		return nil, fmt.Errorf("%s is NCCL %d, older than 2.10 (no ncclAvg): %w", lib, v, rt.ErrUnavailable)
	}
	return ords, nil
}

// newNCCLGroup returns the communicator that mode (TrainOptions.Collective)
// and launch (TrainOptions.NCCL) ask for over devs: nil for the host path.
func newNCCLGroup(devs []rt.Device, mode string, launch *nccl.Launch) (*ncclGroup, error) {
	if launch != nil {
		return joinNCCL(devs, mode, *launch)
	}
	switch mode {
	case "host":
		return nil, nil
	case "", "nccl":
	default:
		return nil, fmt.Errorf("engine: data-parallel trainer: collective %q is not \"\", \"host\" or \"nccl\"", mode)
	}
	ords, err := ncclUnusable(devs)
	if err != nil {
		if mode == "nccl" {
			return nil, fmt.Errorf("engine: data-parallel trainer: NCCL: %w", err)
		}
		return nil, nil
	}
	comms, err := nccl.InitAll(ords)
	if err != nil {
		if mode == "nccl" {
			return nil, fmt.Errorf("engine: data-parallel trainer: %w", err)
		}
		return nil, nil
	}
	return &ncclGroup{comms: comms}, nil
}

// joinNCCL makes the one device of devs rank l.Rank of a communicator
// of l.NRanks processes: the TCP bootstrap (rank 0 serves the unique id
// at l.Root), then ncclCommInitRank with the device's context current.
func joinNCCL(devs []rt.Device, mode string, l nccl.Launch) (*ncclGroup, error) {
	if mode != "" && mode != "nccl" {
		return nil, fmt.Errorf("engine: data-parallel trainer: an NCCL launch needs collective \"nccl\", not %q", mode)
	}
	if len(devs) != 1 {
		return nil, fmt.Errorf("engine: data-parallel trainer: an NCCL launch takes one device per process, not %d", len(devs))
	}
	if _, err := ncclUnusable(devs); err != nil {
		return nil, fmt.Errorf("engine: data-parallel trainer: NCCL: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bootstrapTimeout)
	defer cancel()
	id, err := nccl.Bootstrap(ctx, l, nccl.GetUniqueID)
	if err != nil {
		return nil, fmt.Errorf("engine: data-parallel trainer: rank %d of %d: %w", l.Rank, l.NRanks, err)
	}
	// A stream of the device makes its context current for InitRank.
	st, err := devs[0].NewStream(rt.StreamOptions{})
	if err != nil {
		return nil, fmt.Errorf("engine: data-parallel trainer: %w", err)
	}
	defer st.Close()
	ns, ok := st.(rt.NativeStream)
	if !ok {
		return nil, fmt.Errorf("engine: data-parallel trainer: %s has no native stream for NCCL", devs[0].Info().Spec())
	}
	var c *nccl.Comm
	if err := ns.Enqueue(func(uintptr) error {
		var err error
		c, err = nccl.InitRank(l.NRanks, id, l.Rank)
		return err
	}); err != nil {
		return nil, fmt.Errorf("engine: data-parallel trainer: rank %d of %d: %w", l.Rank, l.NRanks, err)
	}
	return &ncclGroup{comms: []*nccl.Comm{c}}, nil
}

// bootstrapTimeout bounds the wait for the other ranks of an NCCL launch.
const bootstrapTimeout = 10 * time.Minute

// allReduce enqueues the all-reduce (ncclAvg) of the given gradient
// buckets of the replicas' flat gradient blocks, in place in their
// arenas, on each replica's stream sts[k] (the last forward-and-backward
// stream, or the segment that finished the buckets) after the work
// submitted to it: one NCCL group of len(buckets)×ranks calls. It
// returns once enqueued; the streams' Wait waits for it.
func (g *ncclGroup) allReduce(pss []*planState, cs []*execCtx, buckets []dist.Bucket, sts []rt.Stream) error {
	R := len(cs)
	if R != len(g.comms) {
		return fmt.Errorf("engine: NCCL: %d replicas for %d ranks", R, len(g.comms))
	}
	pg0 := pss[0].p.paramsG
	if pg0 == nil {
		return nil
	}
	dt, n := pg0.dtype, pg0.bytes()
	if len(buckets) == 0 {
		buckets = dist.Buckets(n, dt.Size(), dist.DefaultGradBucketBytes)
	}
	addrs := make([]uintptr, R)
	streams := make([]rt.NativeStream, R)
	for k := range R {
		pg := pss[k].p.paramsG
		if pg == nil || pg.bytes() != n || pg.dtype != dt {
			return fmt.Errorf("engine: NCCL: replica %d's gradient block differs from replica 0's", k)
		}
		nb, ok := cs[k].arena.(rt.NativeBuffer)
		if !ok {
			return fmt.Errorf("engine: NCCL: replica %d's arena (%T) has no device address", k, cs[k].arena)
		}
		base, err := nb.DeviceAddr()
		if err != nil {
			return fmt.Errorf("engine: NCCL: replica %d: %w", k, err)
		}
		addrs[k] = base + uintptr(pg.root.offset)
		if streams[k], ok = sts[k].(rt.NativeStream); !ok {
			return fmt.Errorf("engine: NCCL: replica %d's stream (%T) has no native queue", k, sts[k])
		}
	}
	es := int64(dt.Size())
	queues := make([]uintptr, R)
	launch := func() error {
		if err := nccl.GroupStart(); err != nil {
			return err
		}
		var errs []error
		for _, b := range buckets {
			for k, c := range g.comms {
				a := addrs[k] + uintptr(b.Off)
				if err := c.AllReduce(a, a, int(b.Len/es), dt, dist.Mean, queues[k]); err != nil {
					errs = append(errs, fmt.Errorf("rank %d, bytes [%d, %d): %w", k, b.Off, b.Off+b.Len, err))
					break
				}
			}
			if len(errs) > 0 {
				break
			}
		}
		errs = append(errs, nccl.GroupEnd())
		return errors.Join(errs...)
	}
	// Hold every stream (its lock and its context) while the group is
	// enqueued: stream k's Enqueue runs k+1's, the last one launches.
	var enq func(k int) error
	enq = func(k int) error {
		if k == R {
			return launch()
		}
		return streams[k].Enqueue(func(q uintptr) error {
			queues[k] = q
			return enq(k + 1)
		})
	}
	if err := enq(0); err != nil {
		return fmt.Errorf("engine: NCCL all-reduce: %w", err)
	}
	return nil
}
