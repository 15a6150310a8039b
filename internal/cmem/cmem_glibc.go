//go:build linux && cgo

package cmem

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

// glibc's struct mallinfo2 (2.33 and later). Both functions are looked up
// at run time, so that other C libraries (musl) build and do nothing.
struct vr_mallinfo2 { size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost; };

static int vr_malloc_stats(size_t* inuse, size_t* heap) {
	struct vr_mallinfo2 (*f)(void) = (struct vr_mallinfo2 (*)(void))dlsym(RTLD_DEFAULT, "mallinfo2");
	if (!f) return 0;
	struct vr_mallinfo2 m = f();
	*inuse = m.uordblks + m.hblkhd;
	*heap = m.arena + m.hblkhd;
	return 1;
}

static int vr_mallopt(int param, int value) {
	int (*f)(int, int) = (int (*)(int, int))dlsym(RTLD_DEFAULT, "mallopt");
	return f ? f(param, value) : 0;
}

static int vr_malloc_trim(void) {
	int (*f)(size_t) = (int (*)(size_t))dlsym(RTLD_DEFAULT, "malloc_trim");
	return f ? f(0) : -1;
}
*/
import "C"

// Stats returns the bytes that C malloc has handed out and not freed, and
// the bytes of its heaps, free parts included (glibc's mallinfo2); ok is
// false where they are not known.
func Stats() (inUse, heap int64, ok bool) {
	var u, h C.size_t
	if C.vr_malloc_stats(&u, &h) == 0 {
		return 0, 0, false
	}
	return int64(u), int64(h), true
}

// Trim returns the C heap's free memory to the system (glibc's
// malloc_trim(0)).
func Trim() { C.vr_malloc_trim() }

// SetMmapThreshold fixes glibc's mmap threshold at n bytes (mallopt
// M_MMAP_THRESHOLD), which also stops glibc from raising it when large
// blocks are freed: blocks of n bytes or more are then mapped and
// unmapped, never kept in malloc's arenas. It reports whether the C
// library took the setting. The environment variable
// MALLOC_MMAP_THRESHOLD_ does the same for a whole process.
func SetMmapThreshold(n int) bool {
	const mMmapThreshold = -3
	return C.vr_mallopt(mMmapThreshold, C.int(n)) == 1
}
