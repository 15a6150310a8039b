// Package nn is vrun's Go API for building and training networks. This
// file holds the package comment until the layers land; schedule.go has
// the learning-rate schedules that drive engine.Trainer.SetLR.
package nn
