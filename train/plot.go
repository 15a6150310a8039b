package train

import (
	"bytes"
	"fmt"
	"image/color"
	"math"

	"github.com/vrun-go/vrun/internal/atomicfile"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// PlotPNG draws the loss and accuracy curves of a run as a PNG: on the
// left the loss of every step (thin) and each epoch's mean training and
// validation loss, on the right each epoch's training and validation
// accuracy (for losses that have one). The x axis counts epochs.
func PlotPNG(res *Result, stepsPerEpoch int) ([]byte, error) {
	if res == nil || (len(res.Losses) == 0 && len(res.Epochs) == 0) {
		return nil, fmt.Errorf("train: plot: no steps to draw")
	}
	grey := color.RGBA{R: 150, G: 150, B: 150, A: 255}
	blue := color.RGBA{R: 31, G: 119, B: 180, A: 255}
	orange := color.RGBA{R: 255, G: 127, B: 14, A: 255}

	lp := plot.New()
	lp.Title.Text = "loss"
	lp.X.Label.Text = "epoch"
	lp.Legend.Top = true
	spe := float64(max(stepsPerEpoch, 1))
	if len(res.Losses) > 0 {
		pts := make(plotter.XYs, len(res.Losses))
		for i, v := range res.Losses {
			pts[i] = plotter.XY{X: float64(i+1) / spe, Y: v}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, fmt.Errorf("train: plot: %w", err)
		}
		l.Color, l.Width = grey, vg.Points(0.5)
		lp.Add(l)
		lp.Legend.Add("train (step)", l)
	}
	epochLine := func(p *plot.Plot, name string, c color.Color, get func(EpochStats) float64) error {
		var pts plotter.XYs
		for _, e := range res.Epochs {
			if v := get(e); !math.IsNaN(v) {
				pts = append(pts, plotter.XY{X: float64(e.Epoch), Y: v})
			}
		}
		if len(pts) == 0 {
			return nil
		}
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return fmt.Errorf("train: plot: %w", err)
		}
		l.Color, l.Width, s.Color = c, vg.Points(1.5), c
		s.Shape = draw.CircleGlyph{}
		p.Add(l, s)
		p.Legend.Add(name, l, s)
		return nil
	}
	val := func(f func(Metrics) float64) func(EpochStats) float64 {
		return func(e EpochStats) float64 {
			if e.Val.Samples == 0 {
				return math.NaN()
			}
			return f(e.Val)
		}
	}
	loss := func(m Metrics) float64 { return m.Loss }
	acc := func(m Metrics) float64 { return 100 * m.Accuracy }
	if err := epochLine(lp, "train (epoch mean)", blue, func(e EpochStats) float64 { return e.Train.Loss }); err != nil {
		return nil, err
	}
	if err := epochLine(lp, "validation", orange, val(loss)); err != nil {
		return nil, err
	}

	ap := plot.New()
	ap.Title.Text = "accuracy (%)"
	ap.X.Label.Text = "epoch"
	ap.Legend.Top = false // bottom right: accuracy rises towards the top
	hasAcc := false
	for _, e := range res.Epochs {
		hasAcc = hasAcc || e.Train.HasAccuracy()
	}
	if hasAcc {
		if err := epochLine(ap, "train", blue, func(e EpochStats) float64 { return acc(e.Train) }); err != nil {
			return nil, err
		}
		if err := epochLine(ap, "validation", orange, val(acc)); err != nil {
			return nil, err
		}
	} else {
		ap.Title.Text = "accuracy: none for this loss"
	}
	if len(res.Epochs) > 0 {
		lp.X.Min, ap.X.Min = 0, 0
		ap.X.Max = float64(res.Epochs[len(res.Epochs)-1].Epoch) + 0.2
		ap.X.Min = 0.8
	}

	img := vgimg.New(vg.Points(720), vg.Points(300))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Points(20), PadTop: vg.Points(8), PadBottom: vg.Points(8),
		PadLeft: vg.Points(8), PadRight: vg.Points(8)}
	plots := [][]*plot.Plot{{lp, ap}}
	canvases := plot.Align(plots, tiles, dc)
	lp.Draw(canvases[0][0])
	ap.Draw(canvases[0][1])
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("train: plot: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteFileAtomic writes b to path through a temporary file in the same
// folder and a rename, so that no partial file is ever left at path.
func WriteFileAtomic(path string, b []byte) error { return atomicfile.WriteBytes(path, b) }
