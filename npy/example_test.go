package npy_test

import (
	"bytes"
	"fmt"

	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

func Example() {
	x := rt.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)

	var buf bytes.Buffer // or npy.WriteFile("x.npy", x); np.load("x.npy") in Python
	if err := npy.Write(&buf, x); err != nil {
		panic(err)
	}
	fmt.Println(buf.Len(), "bytes; header:", string(bytes.TrimSpace(buf.Bytes()[10:128])))

	y, err := npy.Read(&buf)
	if err != nil {
		panic(err)
	}
	fmt.Println(y.DType, y.Shape, y.Float32s())
	// Output:
	// 152 bytes; header: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
	// f32 [2 3] [1 2 3 4 5 6]
}
