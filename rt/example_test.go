package rt_test

import (
	"errors"
	"fmt"

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
