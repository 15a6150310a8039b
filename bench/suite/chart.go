package main

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
)

// Chart layout, in pixels.
const (
	chartW     = 1000
	chartTop   = 44 // title and legend
	headingH   = 18 // a section's heading row
	barRowH    = 12 // one bar
	chartAxisH = 26 // tick labels under the bars
	valueW     = 56 // the value column right of the plot
)

var (
	colWhite = color.RGBA{255, 255, 255, 255}
	colText  = color.RGBA{30, 30, 30, 255}
	colGrid  = color.RGBA{225, 225, 225, 255}
	colRef   = color.RGBA{0, 0, 0, 255}
	// implColors are the bar colours by baseline, in implOrder.
	implColors = map[string]color.RGBA{
		"numpy":         {31, 119, 180, 255},
		"pytorch":       {255, 127, 14, 255},
		"pytorch-graph": {214, 39, 40, 255},
		"onnxruntime":   {44, 160, 44, 255},
	}
	colOther = color.RGBA{127, 127, 127, 255}
)

// bar is one row of the chart: vrun's speed against one baseline.
type bar struct {
	heading string // set on a section's heading row instead
	label   string
	impl    string
	speed   float64
}

// chartBars lists the chart's rows: per file a heading, then per kind,
// vrun result and baseline (in the tables' order) one bar.
func chartBars(files []*File) []bar {
	var out []bar
	for _, f := range files {
		out = append(out, bar{heading: fmt.Sprintf("%s: %s, commit %s", f.Section, f.Date, f.Commit)})
		for _, kind := range Kinds {
			rows, impls := comparisons(f, kind)
			for _, c := range rows {
				for _, impl := range impls {
					b, ok := c.base[impl]
					if !ok {
						continue
					}
					s, ok := speedup(c.vrun, b)
					if !ok {
						continue
					}
					label := fmt.Sprintf("%s %s %s", kind, c.vrun.Case, c.vrun.Device)
					if kind == "model" {
						label = fmt.Sprintf("%s b%d %s", c.vrun.Case, c.vrun.Batch, c.vrun.Device)
					}
					out = append(out, bar{label: label + " / " + implTitle(impl), impl: impl, speed: s})
				}
			}
		}
	}
	return out
}

// ChartSize is the size of the chart of bars.
func ChartSize(bars []bar) (w, h int) {
	h = chartTop + chartAxisH
	for _, b := range bars {
		if b.heading != "" {
			h += headingH
		} else {
			h += barRowH
		}
	}
	return chartW, h
}

// DrawChart draws vrun's speed against each baseline (the baseline's
// time over vrun's: above 1, vrun is faster), one horizontal bar per
// pair, on a log scale with a reference line at 1.
func DrawChart(files []*File) *image.RGBA {
	bars := chartBars(files)
	w, h := ChartSize(bars)
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	fill(img, img.Bounds(), colWhite)
	labelW := 0
	lo, hi := 0.5, 2.0
	for _, b := range bars {
		if b.heading == "" {
			labelW = max(labelW, textWidth(b.label))
			lo, hi = math.Min(lo, b.speed), math.Max(hi, b.speed)
		}
	}
	labelW = min(labelW, 420)
	lo = math.Pow(10, math.Floor(math.Log10(math.Max(lo, 1e-3))))
	hi = math.Pow(10, math.Ceil(math.Log10(math.Min(hi, 1e3))))
	x0, x1 := 8+labelW+8, w-valueW
	xOf := func(v float64) int {
		v = math.Min(math.Max(v, lo), hi)
		return x0 + int(math.Round(float64(x1-x0)*math.Log(v/lo)/math.Log(hi/lo)))
	}
	drawText(img, 8, 6, "vrun speed / baseline speed (baseline time / vrun time), log scale: right of 1, vrun is faster", colText)
	lx := 8
	present := map[string]bool{}
	for _, b := range bars {
		present[b.impl] = true
	}
	for _, x := range implOrder {
		if !present[x.impl] {
			continue
		}
		c := implColors[x.impl]
		fill(img, image.Rect(lx, 24, lx+10, 32), c)
		drawText(img, lx+14, 25, x.title, colText)
		lx += 14 + textWidth(x.title) + 16
	}
	plotTop, plotBottom := chartTop, h-chartAxisH
	// Grid at 1, 2, 5 times powers of ten, labelled under the plot.
	for d := lo; d <= hi*1.0001; d *= 10 {
		for _, m := range []float64{1, 2, 5} {
			v := d * m
			if v > hi*1.0001 {
				break
			}
			x := xOf(v)
			fill(img, image.Rect(x, plotTop, x+1, plotBottom), colGrid)
			s := fmt.Sprintf("%g", v)
			drawText(img, x-textWidth(s)/2, plotBottom+6, s, colText)
		}
	}
	y := chartTop
	for _, b := range bars {
		if b.heading != "" {
			drawText(img, 8, y+6, b.heading, colText)
			y += headingH
			continue
		}
		label := b.label
		for textWidth(label) > labelW && len(label) > 1 {
			label = label[1:]
		}
		drawText(img, 8+labelW-textWidth(label), y+2, label, colText)
		c, ok := implColors[b.impl]
		if !ok {
			c = colOther
		}
		xa, xb := xOf(1), xOf(b.speed)
		if xb < xa {
			xa, xb = xb, xa
		}
		fill(img, image.Rect(xa, y+2, max(xb, xa+1), y+10), c)
		drawText(img, x1+6, y+2, fmtRatio(b.speed), colText)
		y += barRowH
	}
	xr := xOf(1)
	fill(img, image.Rect(xr, plotTop, xr+1, plotBottom), colRef)
	fill(img, image.Rect(x0, plotBottom, x1, plotBottom+1), colRef)
	return img
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

// WriteChart draws the chart of files into the PNG file path.
func WriteChart(path string, files []*File) error {
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&buf, DrawChart(files)); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
