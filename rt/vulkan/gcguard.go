//go:build cgo

package vulkan

import (
	"runtime/debug"
	"sync"
)

// goki/vulkan's generated wrappers copy struct arguments into C memory and
// free that memory from a finalizer set on a variable that is unreachable
// as soon as the wrapper has the C pointer. A garbage collection that
// completes while the Vulkan call is still running can therefore free the
// call's own arguments (seen as "free(): corrupted unsorted chunks" inside
// vkEnumerateInstanceExtensionProperties). Until the bindings are replaced,
// every entry point of this package that calls into goki holds noGC: no GC
// cycle starts while any such call is in flight, so those finalizers only
// run after the calls have returned.

var gcGuard struct {
	mu  sync.Mutex
	n   int
	old int
}

// noGC stops new GC cycles until the returned function is called. Calls
// nest and may overlap across goroutines; the GC setting is restored when
// the last one ends.
func noGC() (done func()) {
	gcGuard.mu.Lock()
	if gcGuard.n == 0 {
		gcGuard.old = debug.SetGCPercent(-1)
	}
	gcGuard.n++
	gcGuard.mu.Unlock()
	return func() {
		gcGuard.mu.Lock()
		gcGuard.n--
		if gcGuard.n == 0 {
			debug.SetGCPercent(gcGuard.old)
		}
		gcGuard.mu.Unlock()
	}
}
