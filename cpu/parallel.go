package cpu

import (
	"runtime"
	"sync"
	"unsafe"
)

// workers is the number of goroutines a kernel may fan out to.
func workers() int { return runtime.GOMAXPROCS(0) }

// parallelFor splits [0, n) into at most workers() contiguous ranges of at
// least grain items and runs f on each, the last one on the calling
// goroutine.
func parallelFor(n, grain int, f func(lo, hi int)) {
	if n <= 0 {
		return
	}
	if grain < 1 {
		grain = 1
	}
	w := workers()
	if m := n / grain; m < w {
		w = m
	}
	if w <= 1 {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	for i := 0; i < w-1; i++ {
		lo, hi := i*n/w, (i+1)*n/w
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(lo, hi)
		}()
	}
	f((w-1)*n/w, n)
	wg.Wait()
}

// elems views a byte slice (aligned for T) as a slice of T.
func elems[T any](b []byte) []T {
	var z T
	sz := int(unsafe.Sizeof(z))
	if len(b) < sz {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/sz)
}

// asBytes views a slice of T as bytes.
func asBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(z)))
}
