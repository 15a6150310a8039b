package backendtest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// MemorySizes are the transfer sizes Memory tests: odd sizes around the
// 256-byte alignment, the 4 KiB page and the 16 MiB staging chunk of the
// GPU backends.
var MemorySizes = []int64{1, 7, 255, 257, 4099, 65537, 1<<20 + 3, 16<<20 + 5}

// Memory checks d's transfers and the optional memory interfaces of rt
// (Copier, Mapper, HostAllocator, MemoryReporter) against host copies:
// for each size, pageable and pinned Write and Read, stream Write and
// Read (from pageable and pinned memory, replayed twice with new data),
// device-to-device Copy at odd offsets, the Map view, and that the live
// allocations return to their baseline. Sizes above maxSize are skipped.
func Memory(t *testing.T, d rt.Device, maxSize int64) {
	t.Helper()
	var base rt.MemoryUsage
	mr, hasUsage := d.(rt.MemoryReporter)
	if hasUsage {
		base = mr.MemoryUsage()
	}
	rng := rand.New(rand.NewSource(7))
	fill := func(n int64) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Intn(255) + 1)
		}
		return b
	}
	for _, n := range MemorySizes {
		if n > maxSize {
			continue
		}
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			a, err := d.Alloc(n)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Free()
			b, err := d.Alloc(n + 3)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Free()
			want := fill(n)
			// Pageable Write, Read.
			if err := d.Write(a, 0, want); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, n)
			if err := d.Read(got, a, 0); err != nil {
				t.Fatal(err)
			}
			check(t, "pageable write/read", got, want)
			// Device-to-device copy at an odd offset.
			if err := rt.CopyBuffer(d, b, 3, a, 0, n); err != nil {
				t.Fatal(err)
			}
			got2 := make([]byte, n)
			if err := d.Read(got2, b, 3); err != nil {
				t.Fatal(err)
			}
			check(t, "copy", got2, want)
			if c, ok := d.(rt.Copier); ok {
				// Copier.Copy checks its ranges itself.
				for _, bad := range [][3]int64{{0, 1, n}, {4, 0, n}, {0, 0, -1}, {-1, 0, 1}} {
					if err := c.Copy(b, bad[0], a, bad[1], bad[2]); err == nil {
						t.Errorf("Copy(dstOff %d, srcOff %d, n %d) of %d bytes into %d: no error", bad[0], bad[1], bad[2], n, n+3)
					}
				}
			}
			if n > 1 {
				// A copy inside one buffer (disjoint halves).
				h := n / 2
				if err := rt.CopyBuffer(d, b, 3+h, b, 3, h); err != nil {
					t.Fatal(err)
				}
				if err := d.Read(got2[:h], b, 3+h); err != nil {
					t.Fatal(err)
				}
				check(t, "copy within a buffer", got2[:h], want[:h])
			}
			// Map view.
			if v := rt.MapBuffer(d, a); v != nil {
				if int64(len(v)) != n {
					t.Fatalf("Map: %d bytes, want %d", len(v), n)
				}
				check(t, "map", v, want)
				v[0] ^= 0xff
				if err := d.Read(got[:1], a, 0); err != nil {
					t.Fatal(err)
				}
				if got[0] != want[0]^0xff {
					t.Errorf("a write through Map is not seen by Read")
				}
				v[0] ^= 0xff
			} else if d.Info().Unified && d.Info().Backend == "cpu" {
				t.Errorf("cpu device does not map its buffers")
			}
			// Pinned host memory.
			hb, err := rt.AllocHost(d, n)
			if err != nil {
				t.Fatal(err)
			}
			defer hb.Free()
			hp := hb.Bytes()[:n]
			want = fill(n)
			copy(hp, want)
			if err := d.Write(a, 0, hp); err != nil {
				t.Fatal(err)
			}
			clear(hp)
			if err := d.Read(hp, a, 0); err != nil {
				t.Fatal(err)
			}
			check(t, "pinned write/read", hp, want)
			// A pinned sub-slice at an offset.
			if n > 2 {
				want = fill(n - 2)
				copy(hp[1:], want)
				if err := d.Write(a, 1, hp[1:n-1]); err != nil {
					t.Fatal(err)
				}
				if err := d.Read(got[:n-2], a, 1); err != nil {
					t.Fatal(err)
				}
				check(t, "pinned write at an offset", got[:n-2], want)
			}
			// Streams, replayed with new data: pageable to a, pinned to b,
			// read back both ways.
			s, err := d.NewStream(rt.StreamOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			src := make([]byte, n)
			outP := make([]byte, n)
			hb2, err := rt.AllocHost(d, n)
			if err != nil {
				t.Fatal(err)
			}
			defer hb2.Free()
			outPin := hb2.Bytes()[:n]
			for _, e := range []error{s.Write(a, 0, src), s.Write(b, 0, hp), s.Read(outPin, a, 0), s.Read(outP, b, 0)} {
				if e != nil {
					t.Fatal(e)
				}
			}
			for rep := 0; rep < 2; rep++ {
				w1, w2 := fill(n), fill(n)
				copy(src, w1)
				copy(hp, w2)
				if err := s.Submit(); err != nil {
					t.Fatal(err)
				}
				if err := s.Wait(); err != nil {
					t.Fatal(err)
				}
				check(t, fmt.Sprintf("stream replay %d: pageable in, pinned out", rep), outPin, w1)
				check(t, fmt.Sprintf("stream replay %d: pinned in, pageable out", rep), outP, w2)
			}
		})
	}
	if hasUsage {
		if u := mr.MemoryUsage(); u != base {
			t.Errorf("memory usage %+v after freeing everything, want the baseline %+v", u, base)
		}
	}
}

func check(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && got[i] == want[i] {
			i++
		}
		t.Errorf("%s: %d bytes differ, first at %d", what, len(want), i)
	}
}

// MemPool checks an rt.MemPool over d: device tensors round-trip through
// it for each dtype at odd shapes, blocks are reused by size class, Trim
// and Close give the memory back (the device's MemoryReporter returns to
// its baseline), and a limit makes an out-of-memory error that names the
// request and the pool.
func MemPool(t *testing.T, d rt.Device) {
	t.Helper()
	var base rt.MemoryUsage
	mr, hasUsage := d.(rt.MemoryReporter)
	if hasUsage {
		base = mr.MemoryUsage()
	}
	p := rt.NewMemPool(d, rt.MemPoolOptions{Limit: 64 << 20})
	rng := rand.New(rand.NewSource(3))
	var keep []*rt.DeviceTensor
	for _, dt := range []rt.DType{rt.F32, rt.F16, rt.F64, rt.I32, rt.I64, rt.U8, rt.I8, rt.Bool} {
		for _, sh := range [][]int{{1}, {3, 5}, {7, 1, 13}, {257, 3}} {
			h, _ := rt.NewTensor(dt, sh...)
			for i := range h.Len() {
				v := float64(rng.Intn(200) - 100)
				if dt == rt.U8 || dt == rt.Bool {
					v = float64(rng.Intn(2))
				}
				h.SetFloat64(i, v)
			}
			x, err := p.ToDevice(h)
			if err != nil {
				t.Fatal(err)
			}
			y, err := p.NewDeviceTensor(dt, sh...)
			if err != nil {
				t.Fatal(err)
			}
			if err := y.CopyFrom(x); err != nil {
				t.Fatal(err)
			}
			back, err := y.ToHost()
			if err != nil {
				t.Fatal(err)
			}
			check(t, fmt.Sprintf("%s%v through the pool", dt, sh), back.Data, h.Data)
			if v := y.Bytes(); v != nil {
				check(t, fmt.Sprintf("%s%v mapped", dt, sh), v, h.Data)
			}
			x.Free()
			keep = append(keep, y)
		}
	}
	st := p.Stats()
	if st.Reuses == 0 || st.InUse <= 0 || st.Reserved < st.InUseBlocks || st.PeakInUse < st.InUse {
		t.Errorf("pool stats after the round trips: %+v", st)
	}
	// Over the limit: an OOM error naming the request and the pool.
	_, err := p.Alloc(65 << 20)
	var oe *rt.OOMError
	if !errors.Is(err, rt.ErrOutOfMemory) || !errors.As(err, &oe) || oe.Request != 65<<20 {
		t.Fatalf("allocation over the limit: %v, want an *rt.OOMError for %d bytes", err, 65<<20)
	} else if msg := err.Error(); !bytes.Contains([]byte(msg), []byte("pool")) || !bytes.Contains([]byte(msg), []byte("reserved")) {
		t.Errorf("OOM error does not describe the pool: %s", msg)
	}
	// Stream-aware reuse: a block freed after work on a stream goes only
	// to that stream until Sync.
	s, err := d.NewStream(rt.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	blk, err := p.AllocOn(100000, s)
	if err != nil {
		t.Fatal(err)
	}
	p.FreeAfter(blk, s)
	other, err := p.Alloc(100000)
	if err != nil {
		t.Fatal(err)
	}
	if other == blk {
		t.Errorf("a block pending on a stream went to an allocation off the stream")
	}
	same, err := p.AllocOn(100000, s)
	if err != nil {
		t.Fatal(err)
	}
	if same != blk {
		t.Errorf("a block freed after work on a stream was not reused on that stream")
	}
	p.Free(same)
	p.Free(other)
	for _, y := range keep[:len(keep)/2] {
		y.Free()
	}
	if p.Trim() <= 0 {
		t.Errorf("Trim released nothing")
	}
	if st := p.Stats(); st.Cached != 0 || st.Reserved != st.InUseBlocks {
		t.Errorf("stats after Trim: %+v", st)
	}
	// Close with tensors alive: they stay valid, and their Free releases
	// them to the device.
	p.Close()
	if _, err := p.Alloc(1); !errors.Is(err, rt.ErrClosed) {
		t.Errorf("Alloc after Close: %v, want ErrClosed", err)
	}
	if _, err := keep[len(keep)-1].ToHost(); err != nil {
		t.Errorf("a device tensor after its pool closed: %v", err)
	}
	for _, y := range keep[len(keep)/2:] {
		y.Free()
	}
	if st := p.Stats(); st.Reserved != 0 || st.InUse != 0 || st.Blocks != 0 {
		t.Errorf("stats after Close and Free: %+v", st)
	}
	if hasUsage {
		if u := mr.MemoryUsage(); u != base {
			t.Errorf("memory usage %+v after the pool closed, want the baseline %+v", u, base)
		}
	}
}
