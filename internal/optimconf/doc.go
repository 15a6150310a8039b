// Package optimconf checks a backend's rt.OptimStep, the fused optimizer
// update, against the torch.optim references of testdata/optimstep (made
// by its gen.py): every update rule and flag combination, f32 and f64,
// parameter counts 1, 37 and 300, three consecutive steps from a random
// (or torch's fresh) optimizer state. Every backend's tests call [Run].
package optimconf
