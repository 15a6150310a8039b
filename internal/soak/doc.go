// Package soak measures long-lived processes: a model loaded, run and
// closed again and again in one process, then one model run many times,
// with the resident set size (RSS) read after each step.
//
// Its test (soak_test.go) runs on every backend that has a device here
// and fails when a Load after a Close fails or RSS grows past a stated
// bound after warm-up. CI runs a short count; on a GPU machine build the
// test binary and give it more:
//
//	go test -c -o soak.test ./internal/soak
//	./soak.test -test.v -test.run TestSoak -soak.cycles 200 -soak.runs 1000
package soak
