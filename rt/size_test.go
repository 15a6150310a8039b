package rt

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMulAddBytes(t *testing.T) {
	for _, tc := range []struct {
		a, b, mul, add int64
	}{
		{0, 0, 0, 0},
		{3, 4, 12, 7},
		{1 << 31, 1 << 31, 1 << 62, 1 << 32},
		{1 << 32, 1 << 31, -1, 1<<32 + 1<<31},
		{math.MaxInt64, 1, math.MaxInt64, -1},
		{math.MaxInt64, 2, -1, -1},
		{-1, 5, -1, -1},
		{5, -1, -1, -1},
	} {
		if got := MulBytes(tc.a, tc.b); got != tc.mul {
			t.Errorf("MulBytes(%d, %d) = %d, want %d", tc.a, tc.b, got, tc.mul)
		}
		if got := AddBytes(tc.a, tc.b); got != tc.add {
			t.Errorf("AddBytes(%d, %d) = %d, want %d", tc.a, tc.b, got, tc.add)
		}
	}
}

func TestTensorBytes(t *testing.T) {
	for _, tc := range []struct {
		dt    DType
		shape []int
		want  int64
	}{
		{F32, []int{2, 3}, 24},
		{F64, nil, 8},
		{U8, []int{0, 1 << 40}, 0},
		{F32, []int{1 << 28, 37}, 39728447488},
		{F32, []int{100000000000, 37}, 14800000000000},
		{F32, []int{1 << 20, 1 << 20}, 1 << 42},
		{F64, []int{1 << 31, 1 << 31}, -1}, // 2^65 bytes
		{F32, []int{1 << 62, 2}, -1},       // elements overflow
		{F32, []int{3, -1}, -1},
	} {
		if got := TensorBytes(tc.dt, tc.shape); got != tc.want {
			t.Errorf("TensorBytes(%s, %v) = %d, want %d", tc.dt, tc.shape, got, tc.want)
		}
	}
}

func TestCheckTensorSize(t *testing.T) {
	avail, _ := HostMemory()
	for _, tc := range []struct {
		shape []int
		host  bool
		want  string // "" for no error
	}{
		{[]int{4, 37}, true, ""},
		{[]int{1 << 20, 1 << 20}, false, ""}, // 4 TiB: below MaxTensorBytes
		{[]int{1 << 20, 1 << 20}, true, `input "x" f32[1048576 1048576] needs 4.0 TiB, more than the`}, // host memory
		{[]int{100000000000, 37}, true, "needs 13.5 TiB"},
		{[]int{1 << 40, 1 << 10}, false, "that vrun allows for one tensor"},
		{[]int{1 << 62, 1 << 10}, false, "needs more than 8 EiB"},
	} {
		err := CheckTensorSize(`input "x"`, F32, tc.shape, tc.host)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%v: %v", tc.shape, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrTooLarge) {
			t.Errorf("%v (host %v, %s available): got %v, want an ErrTooLarge containing %q", tc.shape, tc.host, FormatBytes(avail), err, tc.want)
		}
		var se *SizeError
		if !errors.As(err, &se) || se.Limit <= 0 {
			t.Errorf("%v: %v is not a *SizeError with a limit", tc.shape, err)
		}
	}
}

func TestMeminfo(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		text         string
		avail, total int64
		ok           bool
	}{
		{"MemTotal:       16384 kB\nMemFree:  100 kB\nMemAvailable:    8192 kB\n", 8192 << 10, 16384 << 10, true},
		{"MemTotal:       16384 kB\n", 0, 0, false}, // kernels before 3.14
		{"garbage", 0, 0, false},
	} {
		p := filepath.Join(dir, "meminfo")
		if err := os.WriteFile(p, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		avail, total, ok := meminfo(p)
		if lim, _ := cgroupLimit(); ok && lim > 0 {
			avail, total = tc.avail, tc.total // a cgroup limit may lower them; not under test here
		}
		if avail != tc.avail || total != tc.total || ok != tc.ok {
			t.Errorf("%q: got %d, %d, %v; want %d, %d, %v", tc.text, avail, total, ok, tc.avail, tc.total, tc.ok)
		}
	}
	if _, _, ok := meminfo(filepath.Join(dir, "none")); ok {
		t.Error("a missing file read as ok")
	}
	if avail, total := HostMemory(); avail <= 0 || total < avail {
		t.Errorf("HostMemory() = %d, %d", avail, total)
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 1 << 30: "1.0 GiB", 404 << 40: "404.0 TiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestOpenErrorsSayBackendOnce(t *testing.T) {
	cuda := &fakeBackend{name: "cuda", err: errors.New("cuda: no CUDA driver found: backend unavailable")}
	withBackends(t, cuda)
	_, err := Open("cuda:0", nil)
	if err == nil || err.Error() != "cuda:0: no CUDA driver found: backend unavailable" {
		t.Errorf("got %v", err)
	}
	if !errors.Is(err, cuda.err) {
		t.Errorf("%v does not wrap the backend's error", err)
	}
}

func TestCheckRange(t *testing.T) {
	for _, c := range []struct {
		size, off, n int64
		ok           bool
	}{
		{10, 0, 10, true}, {10, 10, 0, true}, {10, 3, 7, true}, {0, 0, 0, true},
		{10, 0, 11, false}, {10, 4, 7, false}, {10, 11, 0, false}, {10, -1, 1, false},
		{10, 0, -1, false}, {10, 5, math.MaxInt64, false}, {10, math.MaxInt64, 1, false},
	} {
		if err := CheckRange(c.size, c.off, c.n); (err == nil) != c.ok {
			t.Errorf("CheckRange(%d, %d, %d) = %v, want ok %v", c.size, c.off, c.n, err, c.ok)
		}
	}
	if err := CheckCopy(8, 0, 8, 0, 8); err != nil {
		t.Errorf("CheckCopy of whole buffers: %v", err)
	}
	for _, c := range []struct {
		dstSize, dstOff, srcSize, srcOff, n int64
		want                                string
	}{
		{8, 0, 8, 0, -1, "bad size -1"},
		{8, 0, 4, 1, 4, "source: range [1,5) outside buffer of 4 bytes"},
		{8, 5, 8, 0, 4, "destination: range [5,9) outside buffer of 8 bytes"},
	} {
		err := CheckCopy(c.dstSize, c.dstOff, c.srcSize, c.srcOff, c.n)
		if err == nil || err.Error() != c.want {
			t.Errorf("CheckCopy(%d, %d, %d, %d, %d) = %v, want %q", c.dstSize, c.dstOff, c.srcSize, c.srcOff, c.n, err, c.want)
		}
	}
}
