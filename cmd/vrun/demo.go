package main

//go:generate go run ./internal/mkdemo

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/vrun-go/vrun"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

var (
	//go:embed demo/digits.bin
	demoModel []byte
	//go:embed demo/test_x.npy
	demoImages []byte
	//go:embed demo/test_y.npy
	demoLabels []byte
)

// demo classifies the embedded held-out digit images and reports accuracy.
func demo(f *runFlags, w, stderr io.Writer) error {
	opts, err := f.options(stderr)
	if err != nil {
		return err
	}
	g, err := model.Decode(demoModel)
	if err != nil {
		return fmt.Errorf("demo model: %w", err)
	}
	images, err := npy.Read(bytes.NewReader(demoImages))
	if err != nil {
		return fmt.Errorf("demo images: %w", err)
	}
	labels, err := npy.Read(bytes.NewReader(demoLabels))
	if err != nil {
		return fmt.Errorf("demo labels: %w", err)
	}
	opts.Shapes["image"] = images.Shape
	t0 := time.Now()
	m, err := vrun.New(g, opts)
	if err != nil {
		return err
	}
	defer m.Close()
	plan := time.Since(t0)
	dref := modelDevices(m)
	desc, _ := g.MetaValue("description")
	fmt.Fprintf(w, "vrun demo: %s\n", desc)
	fmt.Fprintf(w, "device     %s  %s\n", dref.Spec, dref.Name)
	t0 = time.Now()
	out, err := m.Run(context.Background(), map[string]*rt.Tensor{"image": images})
	if err != nil {
		return err
	}
	elapsed := time.Since(t0)
	var probs *rt.Tensor
	for _, t := range out {
		probs = t
	}
	n, classes := probs.Shape[0], probs.Shape[1]
	pred := make([]int, n)
	correct := 0
	for i := range pred {
		best := 0
		for c := 1; c < classes; c++ {
			if probs.Float64(i*classes+c) > probs.Float64(i*classes+best) {
				best = c
			}
		}
		pred[i] = best
		if best == int(labels.Float64(i)) {
			correct++
		}
	}
	// Show a few digits side by side with their predictions.
	const show = 6
	fmt.Fprintln(w)
	for row := 0; row < 8; row++ {
		var line strings.Builder
		for i := 0; i < show; i++ {
			for col := 0; col < 8; col++ {
				v := images.Float64(i*64 + row*8 + col)
				line.WriteByte(" .:-=+*#"[min(7, int(v*8))])
			}
			line.WriteString("   ")
		}
		fmt.Fprintln(w, "  "+strings.TrimRight(line.String(), " "))
	}
	var cap strings.Builder
	for i := 0; i < show; i++ {
		mark := "ok"
		if pred[i] != int(labels.Float64(i)) {
			mark = "NO"
		}
		fmt.Fprintf(&cap, "%-11s", fmt.Sprintf("%d→%d %s", int(labels.Float64(i)), pred[i], mark))
	}
	fmt.Fprintln(w, "  "+cap.String())
	fmt.Fprintln(w, "  (label→prediction)")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "accuracy   %d/%d = %.2f%% on held-out images\n", correct, n, 100*float64(correct)/float64(n))
	fmt.Fprintf(w, "time       plan %s, batch of %d in %s\n", fmtDur(plan), n, fmtDur(elapsed))
	fmt.Fprintf(w, "\nNext: 'vrun devices' lists devices; 'vrun -h' shows how to run your own model.\n")
	return nil
}
