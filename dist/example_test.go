package dist_test

import (
	"fmt"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/dist"
	"github.com/vrun-go/vrun/rt"
)

// Split a tensor over two devices, then reduce a replicated one.
func Example() {
	a, b := cpu.NewDevice(), cpu.NewDevice() // two logical devices
	defer a.Close()
	defer b.Close()
	devs := []rt.Device{a, b}

	x := rt.FromFloat32([]float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 5, 2)
	arr, _ := dist.Scatter(devs, x, 0) // rows 0-2 on a, 3-4 on b
	defer arr.Free()
	fmt.Println(arr.Shards[0].Shape, arr.Shards[1].Shape)
	back, _ := arr.Gather()
	fmt.Println(back.Float32s())

	g, _ := dist.Replicate(devs, rt.FromFloat32([]float32{2, 4}, 2))
	defer g.Free()
	b.Write(g.Shards[1].Buf, 0, rt.FromFloat32([]float32{6, 8}, 2).Data) // another gradient on b
	// The mean weighted by batch share: (3×[2 4] + 1×[6 8]) / 4.
	g.AllReduce(dist.Mean, dist.ReduceOptions{Weights: []float64{3, 1}})
	out, _ := g.Gather()
	fmt.Println(out.Float32s())
	// Output:
	// [3 2] [2 2]
	// [1 2 3 4 5 6 7 8 9 10]
	// [3 5]
}
