// Package e2e holds the end-to-end test models: NumPy reference data
// (gen.py) and the model.bin files built from it (mk).
package e2e

//go:generate go run ./mk
