package e2e

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/rt"
)

// StressGC runs the test models through the engine in goroutines
// goroutines, each opening its own device with open, running every model
// twice on a new session (the second run replays the recording), checking
// the outputs against NumPy's and closing the device, cycles times, with
// the garbage collector running almost continuously (GOGC=1) and another
// goroutine forcing collections. It is the test for bindings whose C
// memory a finalizer could free during a call: goki/vulkan's did, before
// every Vulkan call went through rt/vulkan's own shim.
func StressGC(t *testing.T, open func() (rt.Device, error), goroutines, cycles int) {
	t.Helper()
	var cases []testCase
	for _, name := range Models {
		c := load(t, name)
		defer c.m.Close()
		cases = append(cases, c)
	}
	defer debug.SetGCPercent(debug.SetGCPercent(1))

	stop := make(chan struct{})
	var gcs sync.WaitGroup
	gcs.Add(1)
	go func() { // collections at any point of the device calls
		defer gcs.Done()
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
				time.Sleep(time.Millisecond)
			}
		}
	}()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < cycles; i++ {
				if err := stressCycle(open, cases); err != nil {
					errs <- fmt.Errorf("goroutine %d, cycle %d: %w", g, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	gcs.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d x %d Open/Run/Close cycles under GOGC=1 in %v", goroutines, cycles, time.Since(start).Round(time.Millisecond))
}

// stressCycle opens a device, runs every case twice on a new session,
// and closes it.
func stressCycle(open func() (rt.Device, error), cases []testCase) error {
	d, err := open()
	if err != nil {
		return err
	}
	for _, c := range cases {
		s, err := engine.New(c.m, d, engine.Options{Shapes: map[string][]int{"x": c.x.Shape}})
		if err != nil {
			d.Close()
			return err
		}
		for run := 0; run < 2; run++ {
			out, err := s.Run(context.Background(), map[string]*rt.Tensor{"x": c.x})
			if err == nil {
				err = Compare(out["y"], c.want, RelTol, AbsTol)
			}
			if err != nil {
				s.Close()
				d.Close()
				return fmt.Errorf("run %d: %w", run, err)
			}
		}
		if err := s.Close(); err != nil {
			d.Close()
			return err
		}
	}
	return d.Close()
}
