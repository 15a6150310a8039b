package checkpoint_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/vrun-go/vrun/checkpoint"
	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// Save a trainer's state after some steps, and resume it in a new trainer.
func Example() {
	b := model.NewBuilder()
	b.Input("x", rt.F32, 4, 2)
	b.Input("y", rt.F32, 4, 1)
	w := b.Weight("w", rt.F32, []int64{2, 1}, []float32{0.5, -0.5})
	d := b.Op("Sub", []string{b.Op("MatMul", []string{"x", w}, nil), "y"}, nil)
	b.Node("loss", "ReduceMean", []string{b.Op("Mul", []string{d, d}, nil)}, []string{"loss"}, map[string]any{"keepdims": 0})
	b.Output("loss")
	m, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	dev := cpu.NewDevice()
	defer dev.Close()
	opts := engine.TrainOptions{Loss: "loss", Optimizer: &engine.Optimizer{Kind: engine.Adam, LR: 0.1}}
	batch := map[string]*rt.Tensor{
		"x": rt.FromFloat32([]float32{1, 0, 0, 1, 1, 1, 2, 1}, 4, 2),
		"y": rt.FromFloat32([]float32{1, 2, 3, 4}, 4, 1),
	}

	tr, err := engine.NewTrainer(m, dev, opts)
	if err != nil {
		log.Fatal(err)
	}
	for range 5 {
		tr.Step(context.Background(), batch)
	}
	c, err := checkpoint.Capture(tr)
	if err != nil {
		log.Fatal(err)
	}
	c.Epoch = 1
	c.Scheduler = json.RawMessage(`{"last_epoch": 1}`)
	dir, _ := os.MkdirTemp("", "ckpt")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "last.ckpt")
	if err := checkpoint.Write(path, c); err != nil {
		log.Fatal(err)
	}
	want, _ := tr.Step(context.Background(), batch)
	tr.Close()

	// Later, in another process:
	c2, err := checkpoint.Read(path)
	if err != nil {
		log.Fatal(err)
	}
	tr2, err := engine.NewTrainer(m, dev, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer tr2.Close()
	if err := c2.Restore(tr2); err != nil {
		log.Fatal(err)
	}
	got, _ := tr2.Step(context.Background(), batch)
	fmt.Println("epoch", c2.Epoch, "step", c2.Train.Steps+1, "same loss:", got.Loss == want.Loss)
	// Output: epoch 1 step 6 same loss: true
}
