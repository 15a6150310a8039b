// Package traintest checks whole training runs on a device: an MLP and a
// small CNN, built with model.Builder from torch's initial weights, are
// trained by engine.Trainer on the batches of testdata/trainrun (made by
// its gen.py) with SGD momentum and Adam, and the loss of every step is
// compared with PyTorch's. Every backend's tests call [Run].
package traintest
