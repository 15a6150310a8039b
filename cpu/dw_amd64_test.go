//go:build linux && amd64 && !purego

package cpu

import (
	"math"
	"math/rand/v2"
	"syscall"
	"testing"
)

// guarded returns n float32s that end (atEnd) or start at an inaccessible
// page, so that a kernel reading or writing a lane past that edge faults,
// and the func that unmaps them.
func guarded(t *testing.T, n int, atEnd bool) ([]float32, func()) {
	t.Helper()
	pg := syscall.Getpagesize()
	dataPages := (4*n + pg - 1) / pg
	mem, err := syscall.Mmap(-1, 0, (dataPages+2)*pg, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mprotect(mem[:pg], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mprotect(mem[(dataPages+1)*pg:], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	start := pg
	if atEnd {
		start = (dataPages+1)*pg - 4*n
	}
	all := asF32Bytes(mem[start : start+4*n])
	return all, func() { syscall.Munmap(mem) }
}

// asmLevels are the kernel levels above Go that this CPU has.
func asmLevels() []int {
	var lv []int
	for l := levelAVX2; l <= hwKernelLevel(); l++ {
		lv = append(lv, l)
	}
	return lv
}

// TestDw3PlaneGuarded runs dw3Plane's kernels on planes, outputs and zero
// rows placed against inaccessible pages (before and after), at every
// width from 1 to 70 and both strides, against a float64 loop.
func TestDw3PlaneGuarded(t *testing.T) {
	rng := rand.New(rand.NewPCG(91, 92))
	for _, lv := range asmLevels() {
		withLevel(lv, func() {
			for width := 1; width <= 70; width++ {
				for s := 1; s <= 2; s++ {
					for _, atEnd := range []bool{true, false} {
						h := 1 + (width*5+s)%6
						// Bottom and right padding 0 to 2.
						pr, pb := (width+s)%3, (width/3+s)%3
						oh := (h+1+pb-3)/s + 1
						n := (width+1+pr-3)/s + 1
						if oh < 1 || n < 1 || (oh-1)*s-1 >= h || (n-1)*s-1 >= width {
							continue
						}
						x, fx := guarded(t, h*width, atEnd)
						y, fy := guarded(t, oh*n, atEnd)
						zero, fz := guarded(t, width, atEnd)
						for i := range x {
							x[i] = float32(rng.NormFloat64())
						}
						clear(zero)
						w := make([]float32, 9)
						for i := range w {
							w[i] = float32(rng.NormFloat64())
						}
						bias, lo, hi := float32(0.25), float32(-1.5), float32(math.Inf(1))
						if width%2 == 0 {
							lo, hi = float32(math.Inf(-1)), 0.5
						}
						x[rng.IntN(len(x))] = float32(math.NaN())
						if !dw3Plane(s, y, x, zero, w, width, h, oh, bias, lo, hi) {
							t.Fatalf("%s: dw3Plane reported no kernel", levelNames[lv])
						}
						for o := 0; o < oh; o++ {
							for i := 0; i < n; i++ {
								sum := float64(bias)
								for r := 0; r < 3; r++ {
									for k := 0; k < 3; k++ {
										ih, iw := s*o+r-1, s*i+k-1
										if ih >= 0 && ih < h && iw >= 0 && iw < width {
											sum += float64(w[3*r+k]) * float64(x[ih*width+iw])
										}
									}
								}
								want := min(max(sum, float64(lo)), float64(hi))
								if sum != sum {
									want = sum
								}
								got := float64(y[o*n+i])
								if (got != got) != (want != want) || math.Abs(got-want) > 1e-5*(1+math.Abs(want)) {
									t.Fatalf("%s width %d stride %d h %d atEnd %v: y[%d][%d] = %v, want %v", levelNames[lv], width, s, h, atEnd, o, i, got, want)
								}
							}
						}
						fx()
						fy()
						fz()
					}
				}
			}
		})
	}
}

// TestDw3FlatGuarded runs the flat depthwise kernel (dw3Flat, levelAVX2)
// on planes and outputs placed against inaccessible pages, widths 1 to
// 40 and heights 1 to 9, against a float64 loop.
func TestDw3FlatGuarded(t *testing.T) {
	rng := rand.New(rand.NewPCG(97, 98))
	withLevel(levelAVX2, func() {
		if !dw3Flat(nil, nil, nil, nil, 0, 0, 0, 0) {
			t.Skip("no flat kernel at this level")
		}
		for width := 1; width <= 40; width++ {
			for h := 1; h <= 9; h++ {
				for _, atEnd := range []bool{true, false} {
					hw := h * width
					x, fx := guarded(t, hw, atEnd)
					y, fy := guarded(t, hw, atEnd)
					for i := range x {
						x[i] = float32(rng.NormFloat64())
					}
					if (width+h)%3 == 0 {
						x[rng.IntN(hw)] = float32(math.NaN())
					}
					w := make([]float32, 9)
					for i := range w {
						w[i] = float32(rng.NormFloat64())
					}
					bias, lo, hi := float32(-0.25), float32(math.Inf(-1)), float32(math.Inf(1))
					if h%2 == 0 {
						lo, hi = 0, 1
					}
					cm := dw3FlatMasks(make([]float32, 72*((hw+7)/8)), width, hw)
					if !dw3Flat(y, x, w, cm, width, bias, lo, hi) {
						t.Fatal("dw3Flat reported no kernel")
					}
					for o := 0; o < h; o++ {
						for i := 0; i < width; i++ {
							sum := float64(bias)
							for r := 0; r < 3; r++ {
								for k := 0; k < 3; k++ {
									ih, iw := o+r-1, i+k-1
									if ih >= 0 && ih < h && iw >= 0 && iw < width {
										sum += float64(w[3*r+k]) * float64(x[ih*width+iw])
									}
								}
							}
							want := min(max(sum, float64(lo)), float64(hi))
							if sum != sum {
								want = sum
							}
							got := float64(y[o*width+i])
							if (got != got) != (want != want) || math.Abs(got-want) > 1e-5*(1+math.Abs(want)) {
								t.Fatalf("width %d h %d atEnd %v: y[%d][%d] = %v, want %v", width, h, atEnd, o, i, got, want)
							}
						}
					}
					fx()
					fy()
				}
			}
		}
	})
}

// TestMaxPoolRowsGuarded runs the 2×2 and 3×3/2 max-pool row kernels on
// inputs and outputs placed against inaccessible pages, widths 1 to 60,
// NaN and -Inf inputs, against a loop, bit for bit.
func TestMaxPoolRowsGuarded(t *testing.T) {
	rng := rand.New(rand.NewPCG(93, 94))
	nanMax := func(m, v float32) float32 {
		if m != m || v != v {
			return float32(math.NaN())
		}
		return max(m, v)
	}
	same := func(a, b float32) bool { return a == b || (a != a && b != b) }
	for _, lv := range asmLevels() {
		withLevel(lv, func() {
			for width := 2; width <= 60; width++ {
				for _, atEnd := range []bool{true, false} {
					// 2×2: rows row pairs of n = width/2 outputs, ldx = 2·width.
					rows, n := 1+width%4, width/2
					x, fx := guarded(t, (rows-1)*2*width+width+2*n, atEnd)
					y, fy := guarded(t, rows*n, atEnd)
					for i := range x {
						x[i] = float32(rng.NormFloat64())
					}
					x[rng.IntN(len(x))] = float32(math.NaN())
					x[rng.IntN(len(x))] = float32(math.Inf(-1))
					if !maxPool22Rows(y, x, rows, width, n, 2*width) {
						t.Fatalf("%s: maxPool22Rows reported no kernel", levelNames[lv])
					}
					for r := 0; r < rows; r++ {
						for j := 0; j < n; j++ {
							b := r * 2 * width
							m := nanMax(nanMax(x[b+2*j], x[b+2*j+1]), nanMax(x[b+width+2*j], x[b+width+2*j+1]))
							if !same(y[r*n+j], m) {
								t.Fatalf("%s mp22 width %d atEnd %v: y[%d][%d] = %v, want %v", levelNames[lv], width, atEnd, r, j, y[r*n+j], m)
							}
						}
					}
					fx()
					fy()
					if width < 3 {
						continue
					}
					// 3×3/2: n outputs with 2n < width; off2 = 2w, or w (the
					// third window row past the plane).
					n = (width - 1) / 2
					for _, third := range []bool{true, false} {
						off2 := 2 * width
						if !third {
							off2 = width
						}
						x, fx := guarded(t, 2*(rows-1)*width+off2+2*n+1, atEnd)
						y, fy := guarded(t, rows*n, atEnd)
						for i := range x {
							x[i] = float32(rng.NormFloat64())
						}
						x[rng.IntN(len(x))] = float32(math.NaN())
						x[rng.IntN(len(x))] = float32(math.Inf(-1))
						if !maxPool33Rows(y, x, rows, width, off2, n) {
							t.Fatalf("%s: maxPool33Rows reported no kernel", levelNames[lv])
						}
						for r := 0; r < rows; r++ {
							for j := 0; j < n; j++ {
								m := float32(math.Inf(-1))
								for _, off := range []int{0, width, off2} {
									for c := 0; c < 3; c++ {
										m = nanMax(m, x[2*r*width+off+2*j+c])
									}
								}
								if !same(y[r*n+j], m) {
									t.Fatalf("%s mp33 width %d off2 %d atEnd %v: y[%d][%d] = %v, want %v", levelNames[lv], width, off2, atEnd, r, j, y[r*n+j], m)
								}
							}
						}
						fx()
						fy()
						if lv != levelAVX2 {
							continue
						}
						// Output rows ldy = n+3 apart, the gaps untouched.
						ldy := n + 3
						y2, fy2 := guarded(t, (rows-1)*ldy+n, atEnd)
						for i := range y2 {
							y2[i] = 7
						}
						x, fx = guarded(t, 2*(rows-1)*width+off2+2*n+1, atEnd)
						for i := range x {
							x[i] = float32(rng.NormFloat64())
						}
						if !maxPool33RowsLd(y2, x, rows, width, off2, n, ldy) {
							t.Fatal("maxPool33RowsLd reported no kernel")
						}
						for r := 0; r < rows; r++ {
							for j := 0; j < ldy && r*ldy+j < len(y2); j++ {
								m := float32(7)
								if j < n {
									m = float32(math.Inf(-1))
									for _, off := range []int{0, width, off2} {
										for c := 0; c < 3; c++ {
											m = nanMax(m, x[2*r*width+off+2*j+c])
										}
									}
								}
								if !same(y2[r*ldy+j], m) {
									t.Fatalf("mp33 ldy width %d off2 %d atEnd %v: y[%d][%d] = %v, want %v", width, off2, atEnd, r, j, y2[r*ldy+j], m)
								}
							}
						}
						fx()
						fy2()
					}
				}
			}
		})
	}
}

// TestInterleaveGuarded runs interleave2 and deinterleave2 on slices
// placed against inaccessible pages, lengths 1 to 40.
func TestInterleaveGuarded(t *testing.T) {
	for _, lv := range asmLevels() {
		withLevel(lv, func() {
			for n := 1; n <= 40; n++ {
				for _, atEnd := range []bool{true, false} {
					a, fa := guarded(t, n, atEnd)
					b, fb := guarded(t, n, atEnd)
					d, fd := guarded(t, 2*n, atEnd)
					for i := range a {
						a[i], b[i] = float32(i+1), -float32(i+1)
					}
					if !interleave2(d, a, b) {
						t.Fatalf("%s: interleave2 reported no kernel", levelNames[lv])
					}
					for i := 0; i < n; i++ {
						if d[2*i] != a[i] || d[2*i+1] != b[i] {
							t.Fatalf("%s n=%d: dst[%d:%d] = %v", levelNames[lv], n, 2*i, 2*i+2, d[2*i:2*i+2])
						}
					}
					clear(a)
					clear(b)
					if !deinterleave2(a, b, d) {
						t.Fatalf("%s: deinterleave2 reported no kernel", levelNames[lv])
					}
					for i := 0; i < n; i++ {
						if a[i] != float32(i+1) || b[i] != -float32(i+1) {
							t.Fatalf("%s n=%d: deinterleave2 [%d] = %v %v", levelNames[lv], n, i, a[i], b[i])
						}
					}
					fa()
					fb()
					fd()
				}
			}
		})
	}
}
