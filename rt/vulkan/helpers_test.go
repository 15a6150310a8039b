//go:build cgo

package vulkan

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"sync"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

var (
	sharedOnce sync.Once
	sharedDev  rt.Device
	sharedErr  error
)

func TestMain(m *testing.M) {
	if os.Getenv("VRUN_VK_VALIDATION") == "" {
		os.Setenv("VRUN_VK_VALIDATION", "1")
	}
	if os.Getenv("VRUN_CACHE_DIR") == "" {
		dir, err := os.MkdirTemp("", "vrun-vk-cache")
		if err == nil {
			os.Setenv("VRUN_CACHE_DIR", dir)
			defer os.RemoveAll(dir)
		}
	}
	code := m.Run()
	if sharedDev != nil {
		if err := sharedDev.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "closing the shared device:", err)
			code = 1
		}
	}
	if msgs := ValidationMessages(); len(msgs) > 0 {
		fmt.Fprintf(os.Stderr, "%d validation messages:\n", len(msgs))
		for _, m := range msgs {
			fmt.Fprintln(os.Stderr, " ", m)
		}
		code = 1
	}
	os.Exit(code)
}

// testIndex is the device the tests use: VRUN_VK_DEVICE or 0.
func testIndex() int {
	var i int
	fmt.Sscan(os.Getenv("VRUN_VK_DEVICE"), &i)
	return i
}

// device returns the shared test device, skipping when there is none.
func testDevice(t testing.TB) rt.Device {
	t.Helper()
	sharedOnce.Do(func() {
		b, _ := rt.Lookup("vulkan")
		if _, err := b.Devices(); err != nil {
			sharedErr = err
			return
		}
		sharedDev, sharedErr = b.Open(testIndex())
	})
	if sharedErr != nil {
		// VRUN_VK_WANT_COOP=1 (CI's run on Mesa 26's lavapipe) wants a
		// device: without one, every test fails rather than skips.
		if errors.Is(sharedErr, rt.ErrUnavailable) && os.Getenv("VRUN_VK_WANT_COOP") != "1" {
			t.Skipf("no Vulkan device: %v", sharedErr)
		}
		t.Fatal(sharedErr)
	}
	return sharedDev
}

func isCPU(d rt.Device) bool { return d.Info().Kind == rt.KindCPU }

// ---- host encoding ----

func encode(dt rt.DType, v []float64) []byte {
	es := dt.Size()
	b := make([]byte, len(v)*es)
	for i, x := range v {
		p := b[i*es:]
		switch dt {
		case rt.F32:
			binary.LittleEndian.PutUint32(p, math.Float32bits(float32(x)))
		case rt.F16:
			binary.LittleEndian.PutUint16(p, rt.F16Bits(float32(x)))
		case rt.F64:
			binary.LittleEndian.PutUint64(p, math.Float64bits(x))
		case rt.I32:
			binary.LittleEndian.PutUint32(p, uint32(int32(x)))
		case rt.I64:
			binary.LittleEndian.PutUint64(p, uint64(int64(x)))
		case rt.U8:
			p[0] = uint8(int64(x))
		case rt.I8:
			p[0] = uint8(int8(int64(x)))
		case rt.Bool:
			if x != 0 {
				p[0] = 1
			} else {
				p[0] = 0
			}
		}
	}
	return b
}

func decode(dt rt.DType, b []byte) []float64 {
	es := dt.Size()
	v := make([]float64, len(b)/es)
	for i := range v {
		p := b[i*es:]
		switch dt {
		case rt.F32:
			v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(p)))
		case rt.F16:
			v[i] = float64(rt.F16Float(binary.LittleEndian.Uint16(p)))
		case rt.F64:
			v[i] = math.Float64frombits(binary.LittleEndian.Uint64(p))
		case rt.I32:
			v[i] = float64(int32(binary.LittleEndian.Uint32(p)))
		case rt.I64:
			v[i] = float64(int64(binary.LittleEndian.Uint64(p)))
		case rt.U8, rt.Bool:
			v[i] = float64(p[0])
		case rt.I8:
			v[i] = float64(int8(p[0]))
		}
	}
	return v
}

// representable rounds v to dt.
func representable(dt rt.DType, v float64) float64 {
	return decode(dt, encode(dt, []float64{v}))[0]
}

func randVals(r *rand.Rand, dt rt.DType, n int, lo, hi float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		x := lo + (hi-lo)*r.Float64()
		switch {
		case dt == rt.Bool:
			x = float64(r.Intn(2))
		case dt == rt.U8:
			x = float64(r.Intn(200) + 1)
		case dt.IsInt():
			x = math.Round(x)
			if x == 0 {
				x = 1
			}
		case x == 0:
			x = 0.5
		}
		v[i] = representable(dt, x)
	}
	return v
}

func tolFor(dt rt.DType) float64 {
	switch dt {
	case rt.F16:
		return 2e-3
	case rt.F64:
		return 1e-12
	case rt.F32:
		return 1e-5
	}
	return 0
}

// ---- device buffers with sentinels ----

const guard = 64 // sentinel bytes on each side of a tensor

type tbuf struct {
	buf  rt.Buffer
	dt   rt.DType
	n    int // elements in the view's extent
	size int64
}

// newBuf allocates room for n elements between two sentinel regions and
// fills everything with sentinel bytes, then writes data (if any).
func newBuf(t testing.TB, d rt.Device, dt rt.DType, n int, data []float64) *tbuf {
	t.Helper()
	size := int64(n*dt.Size()) + 2*guard
	b, err := d.Alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Free)
	fill := make([]byte, size)
	for i := range fill {
		fill[i] = 0xCD
	}
	if data != nil {
		copy(fill[guard:], encode(dt, data))
	}
	if err := d.Write(b, 0, fill); err != nil {
		t.Fatal(err)
	}
	return &tbuf{buf: b, dt: dt, n: n, size: size}
}

func (b *tbuf) ref(shape []int, strides []int) rt.Ref {
	return rt.Ref{Buf: b.buf, Off: guard, DType: b.dt, Shape: shape, Strides: strides}
}

// read returns the n elements and checks that the sentinels are intact.
func (b *tbuf) read(t testing.TB, d rt.Device) []float64 {
	t.Helper()
	raw := make([]byte, b.size)
	if err := d.Read(raw, b.buf, 0); err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < guard; i++ {
		if raw[i] != 0xCD || raw[b.size-1-i] != 0xCD {
			t.Fatalf("sentinel bytes around the output were overwritten")
		}
	}
	return decode(b.dt, raw[guard:b.size-guard])
}

// supported reports whether op runs here; otherwise it logs why.
func supported(t testing.TB, d rt.Device, op rt.Op) bool {
	t.Helper()
	if err := d.Supports(op); err != nil {
		var ue *rt.UnsupportedError
		if errors.As(err, &ue) {
			t.Logf("skip: %v", err)
			return false
		}
		t.Fatal(err)
	}
	return true
}

func close2(got, want, tol float64) bool {
	if math.IsNaN(want) {
		return math.IsNaN(got)
	}
	if math.IsInf(want, 0) {
		return got == want
	}
	return math.Abs(got-want) <= tol*(1+math.Abs(want))
}

func compare(t testing.TB, what string, got, want []float64, tol float64) {
	t.Helper()
	bad := 0
	for i := range want {
		if !close2(got[i], want[i], tol) {
			if bad < 5 {
				t.Errorf("%s: [%d] = %v, want %v (tol %g)", what, i, got[i], want[i], tol)
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d mismatches in %d", what, bad, len(want))
	}
}
