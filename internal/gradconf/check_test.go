package gradconf

import (
	"context"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// TestCheckCatches shows that Check reports a wrong gradient and a wrong
// loss: the references of one broadcast case are altered in memory the
// way common autograd bugs would alter them.
func TestCheckCatches(t *testing.T) {
	dir, err := DefaultDir()
	if err != nil {
		t.Fatal(err)
	}
	cases, err := Cases(dir)
	if err != nil {
		t.Fatal(err)
	}
	var c *Case
	for i := range cases {
		if cases[i].Name == "add_b51_f32" {
			c = &cases[i]
		}
	}
	if c == nil {
		t.Fatal("case add_b51_f32 not found")
	}
	dev := openCPU(t)
	ctx := context.Background()
	if errs, err := Check(ctx, c, dev); err != nil || len(errs) > 0 {
		t.Fatalf("unaltered case: %v %v", err, errs)
	}
	scaled := func(x *rt.Tensor, f float64) *rt.Tensor {
		v := x.Float64s()
		for i := range v {
			v[i] *= f
		}
		return rt.FromFloat64(x.DType, v, x.Shape...)
	}
	for _, tc := range []struct {
		name, want string
		alter      func(c *Case)
	}{
		// b [5,1] is broadcast over [3,5,7]: an unreduced or averaged
		// gradient is off by the broadcast factor.
		{"grad of b off by the broadcast factor", `gradient of "b"`, func(c *Case) { c.Want[1] = scaled(c.Want[1], 21) }},
		{"grad of a negated", `gradient of "a"`, func(c *Case) { c.Want[0] = scaled(c.Want[0], -1) }},
		{"wrong expected forward", "loss", func(c *Case) { c.Outputs[0].Tensor = scaled(c.Outputs[0].Tensor, 1.01) }},
	} {
		alt := *c
		alt.Want = map[int]*rt.Tensor{0: c.Want[0], 1: c.Want[1]}
		alt.Outputs = append(alt.Outputs[:0:0], c.Outputs...)
		tc.alter(&alt)
		errs, err := Check(ctx, &alt, dev)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
			t.Errorf("%s: Check reported %v, want one error about %s", tc.name, errs, tc.want)
		}
	}
}
