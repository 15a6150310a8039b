// Package optimref checks engine.Trainer's optimizers against the
// torch.optim references in testdata/optim (made by its gen.py): a model
// whose gradients are fed inputs (loss = Σ ReduceSum(w_i·c_i), so
// d loss/d w_i = c_i) is trained for 20 steps and its weights are compared
// with torch's after every step. Every backend's tests can call [Check];
// package nn's tests drive the same runs with learning-rate schedules
// through [Run].
package optimref
