package data

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/vrun-go/vrun/internal/gomnist"
)

// BenchmarkLoader measures, per batch of 64 real MNIST images (random
// crop with padding 2, normalisation), the loading time and the time the
// consumer waits in Next, with and without prefetching, for a step of
// 0 (pure loading), 200µs and 1ms (sleeping, as a device step does).
// With prefetching and a step slower than loading, waits/batch is 0: the
// consumer never waits.
func BenchmarkLoader(b *testing.B) {
	dir, err := gomnist.Dir()
	if err != nil {
		b.Skip(err)
	}
	d, err := ReadMNISTDir(dir, true)
	if err != nil {
		b.Fatal(err)
	}
	for _, step := range []time.Duration{0, 200 * time.Microsecond, time.Millisecond} {
		for _, prefetch := range []int{0, 2} {
			b.Run(fmt.Sprintf("step=%v/prefetch=%d", step, prefetch), func(b *testing.B) {
				l, err := NewLoader(d, LoaderOptions{BatchSize: 64, Shuffle: true, CropPadding: 2, Mean: []float64{0.1307}, Std: []float64{0.3081}, Prefetch: prefetch})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				if _, err := l.Next(); err != nil { // start up: not measured
					b.Fatal(err)
				}
				s0 := l.Stats()
				b.ResetTimer()
				for range b.N {
					if _, err := l.Next(); err == io.EOF {
						l.Next()
					}
					if step > 0 {
						time.Sleep(step)
					}
				}
				b.StopTimer()
				s := l.Stats()
				n := float64(s.Batches - s0.Batches)
				b.ReportMetric(float64(s.Load-s0.Load)/n/1e3, "load-µs/batch")
				b.ReportMetric(float64(s.Wait-s0.Wait)/n/1e3, "wait-µs/batch")
				b.ReportMetric(float64(s.Waits-s0.Waits)/n, "waits/batch")
			})
		}
	}
}
