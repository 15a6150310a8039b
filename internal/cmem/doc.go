// Package cmem gives back the C heap's free memory and reports its use.
//
// GPU drivers allocate with C malloc: lavapipe's device memory and its
// LLVM compiles, pocl's buffers and programs. glibc keeps what they free in
// its arenas (after the first large block is freed, its dynamic mmap
// threshold rises, so later large blocks come from the arenas too), and a
// process that opens and closes devices again and again then grows by
// megabytes a cycle although nothing is leaked. The GPU backends call
// Trim after closing a device, which returns those free pages to the
// system (glibc's malloc_trim). SetMmapThreshold fixes the threshold, so
// that large blocks are never kept; vrun leaves that choice to the program
// (the soak test makes it; MALLOC_MMAP_THRESHOLD_=131072 in the
// environment does the same). Elsewhere (other C libraries, other systems,
// no cgo) the functions do nothing.
package cmem
