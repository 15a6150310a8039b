// Package e2e checks whole models end to end on a device: the MLP and
// CNN test models in testdata/e2e (written by model.Builder) against the
// outputs NumPy computed for them. Every backend's tests call [Check].
package e2e
