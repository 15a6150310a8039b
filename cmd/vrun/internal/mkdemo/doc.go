// Command mkdemo builds vrun's embedded demo model, cmd/vrun/demo/digits.bin,
// from the weights that testdata/demo/train_digits.py trained, and copies
// the held-out test set beside it. Run it with `go generate ./cmd/vrun`.
package main
