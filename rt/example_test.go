package rt_test

import (
	"errors"
	"fmt"

	_ "github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/rt"
)

// Build tensors from Go slices and read them back with their own element
// type; As never converts.
func ExampleFromSlice() {
	x := rt.FromSlice([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	ids := rt.FromInt64([]int64{7, 1 << 40})
	fmt.Println(x.DType, x.Shape, ids.DType, ids.Shape)
	v, err := rt.As[float32](x)
	fmt.Println(v, err)
	_, err = rt.As[int64](x)
	fmt.Println(errors.Is(err, rt.ErrDType))
	fmt.Println(ids.Int64s(), x.Int64s())
	// Output:
	// f32 [2 3] i64 [2]
	// [1 2 3 4 5 6] <nil>
	// true
	// [7 1099511627776] [1 2 3 4 5 6]
}

// A memory pool hands out device buffers by size class and keeps freed
// ones for reuse; Trim gives them back to the device.
func ExampleMemPool() {
	dev, err := rt.Open("cpu", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dev.Close()
	pool := rt.NewMemPool(dev, rt.MemPoolOptions{})
	defer pool.Close()
	x, err := pool.ToDevice(rt.FromFloat32([]float32{1, 2, 3}, 3))
	if err != nil {
		fmt.Println(err)
		return
	}
	y, err := pool.NewDeviceTensor(rt.F32, 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := y.CopyFrom(x); err != nil { // device to device
		fmt.Println(err)
		return
	}
	h, _ := y.ToHost()
	fmt.Println(h.Float32s())
	x.Free()
	y.Free()
	z, _ := pool.NewDeviceTensor(rt.I32, 2) // reuses a cached 256-byte block
	st := pool.Stats()
	fmt.Println(st.Blocks, st.CachedBlocks, st.Reuses, st.DeviceAllocs)
	z.Free()
	fmt.Println(pool.Trim(), "bytes trimmed")
	// Output:
	// [1 2 3]
	// 1 1 1 2
	// 512 bytes trimmed
}
