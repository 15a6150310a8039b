//go:build race

package cpu

// raceEnabled reports a -race build: the race detector allocates in
// instrumented code, so allocation counts mean nothing there.
const raceEnabled = true
