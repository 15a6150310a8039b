package ortpeer

import "testing"

// TestParseProfile reads a small onnxruntime trace: per-node medians
// after the warm-up runs, the op and output shape of each node, largest
// first, and events of other kinds ignored.
func TestParseProfile(t *testing.T) {
	trace := `[
 {"cat":"Session","name":"model_run","dur":900},
 {"cat":"Node","name":"conv_kernel_time","dur":1000,"args":{"op_name":"Conv","output_type_shape":[{"float":[1,64,56,56]}]}},
 {"cat":"Node","name":"conv_fence_before","dur":1},
 {"cat":"Node","name":"pool_kernel_time","dur":50,"args":{"op_name":"MaxPool","output_type_shape":[{"float":[1,64,28,28]}]}},
 {"cat":"Node","name":"conv_kernel_time","dur":300,"args":{"op_name":"Conv"}},
 {"cat":"Node","name":"pool_kernel_time","dur":40,"args":{"op_name":"MaxPool"}},
 {"cat":"Node","name":"conv_kernel_time","dur":200,"args":{"op_name":"Conv"}},
 {"cat":"Node","name":"pool_kernel_time","dur":60,"args":{"op_name":"MaxPool"}},
 {"cat":"Node","name":"conv_kernel_time","dur":100,"args":{"op_name":"Conv"}},
 {"cat":"Node","name":"pool_kernel_time","dur":20,"args":{"op_name":"MaxPool"}}
]`
	got, err := parseProfile([]byte(trace), 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []NodeTime{{"conv", "Conv", "1x64x56x56", 0.2}, {"pool", "MaxPool", "1x64x28x28", 0.04}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("node %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := parseProfile([]byte("{"), 0); err == nil {
		t.Error("a broken trace parsed")
	}
}

// TestQuantiles checks Quantiles and Median on unsorted input: element
// floor(q·n) of the sorted values, NaN for none, the input left as it was.
func TestQuantiles(t *testing.T) {
	v := []float64{7, 1, 9, 3, 5, 2, 8, 4, 6, 10}
	got := Quantiles(v, 0, 0.5, 0.9, 1)
	for i, want := range []float64{1, 6, 10, 10} {
		if got[i] != want {
			t.Errorf("quantile %d of %v = %v, want %v", i, v, got[i], want)
		}
	}
	if m := Median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("Median(3 1 2) = %v, want 2", m)
	}
	if v[0] != 7 {
		t.Errorf("Quantiles sorted its input: %v", v)
	}
	if q := Quantiles(nil, 0.5); q[0] == q[0] {
		t.Errorf("Quantiles of nothing = %v, want NaN", q)
	}
}
