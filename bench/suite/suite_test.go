package main

import (
	"bytes"
	"errors"
	"flag"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestRenderGolden")

func readFixture(t testing.TB) *File {
	t.Helper()
	f, err := ReadFile(filepath.Join("testdata", "small.json"))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestRenderGolden renders the fixture's section and compares it with
// the committed markdown (go test -run RenderGolden -update rewrites it).
func TestRenderGolden(t *testing.T) {
	got := Markdown(readFixture(t))
	golden := filepath.Join("testdata", "small.md")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("markdown differs from %s (go test -run RenderGolden -update rewrites it):\n%s", golden, got)
	}
	if again := Markdown(readFixture(t)); again != got {
		t.Error("two renders of one file differ")
	}
	// Spot checks that do not depend on the golden file being right.
	for _, want := range []string{
		"| f32/n=1024 | cpu:0 | 85.90 | 107.4 | – | 0.80 | – |",
		"| f32/n=1024 | cuda:0 | 35791 | – | 42950 | – | 0.83 |",
		"| 3x3 64-64 56 | cuda:0 | fail | 11560 | – |",
		"| resnet18 | 1 | cuda:0 | 1.20 | 2.40 | 0.600 | – | 0.50 | 2.00 | – |",
		"| resnet18 | 32 | cuda:0 | 4.80 | 4.70 | – | – | 1.02 | – | – |",
		"| resnet18 | 1 | cpu:0 | 20.50 | – | – | 16.40 | – | – | 1.25 |",
		"PyTorch on the CPU (no Python with torch)",
		"`opencl` (no OpenCL loader)",
		`unsupported \| &lt;here&gt;`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
}

// TestChart draws the fixture's chart: a PNG that decodes, with one row
// per vrun result and baseline pair that both have a value.
func TestChart(t *testing.T) {
	f := readFixture(t)
	path := filepath.Join(t.TempDir(), "c.png")
	if err := WriteChart(path, []*File{f}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	// Bars: gemm cpu/NumPy, gemm cuda/PyTorch, resnet18 cpu/onnxruntime,
	// cuda b1/PyTorch, cuda b1/PyTorch graph, cuda b32/PyTorch (the
	// failed conv has none): 6 bars of 12 px and one heading of 18, under
	// a 44 px title and above a 26 px axis.
	if w, h := img.Bounds().Dx(), img.Bounds().Dy(); w != 1000 || h != 44+18+6*12+26 {
		t.Errorf("chart is %d×%d, want 1000×%d", w, h, 44+18+6*12+26)
	}
	var again bytes.Buffer
	if err := png.Encode(&again, DrawChart([]*File{f})); err != nil {
		t.Fatal(err)
	}
	var first bytes.Buffer
	png.Encode(&first, img)
	if !bytes.Equal(first.Bytes(), again.Bytes()) {
		t.Error("two drawings of one file differ")
	}
}

func TestSpeedup(t *testing.T) {
	f := readFixture(t)
	bars := chartBars([]*File{f})
	want := map[string]float64{
		"gemm f32/n=1024 cpu:0 / NumPy":      0.7998,
		"resnet18 b1 cuda:0 / PyTorch graph": 0.5,
		"resnet18 b1 cpu:0 / onnxruntime":    0.8,
	}
	for _, b := range bars {
		if w, ok := want[b.label]; ok {
			if d := b.speed - w; d > 1e-3 || d < -1e-3 {
				t.Errorf("%s: speed %v, want %v", b.label, b.speed, w)
			}
			delete(want, b.label)
		}
	}
	if len(want) > 0 {
		t.Errorf("bars missing: %v", want)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	f := readFixture(t)
	var buf bytes.Buffer
	if err := f.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	g, err := Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f, g) {
		t.Errorf("round trip changed the file:\n%+v\n%+v", f, g)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, c := range []struct{ name, json, want string }{
		{"schema", `{"schema": 2, "section": "a"}`, "schema 2"},
		{"section", `{"schema": 1, "section": "a b"}`, "section"},
		{"unknown field", `{"schema": 1, "section": "a", "extra": 1}`, "unknown field"},
		{"two values", `{"schema": 1, "section": "a"} {}`, "more than one"},
		{"kind", `{"schema": 1, "section": "a", "results": [{"kind": "x", "case": "c", "impl": "vrun", "device": "cpu", "class": "cpu", "ms": 1}]}`, "unknown kind"},
		{"class", `{"schema": 1, "section": "a", "results": [{"kind": "gemm", "case": "c", "impl": "vrun", "device": "cpu", "class": "tpu", "ms": 1}]}`, "class"},
		{"negative", `{"schema": 1, "section": "a", "results": [{"kind": "gemm", "case": "c", "impl": "vrun", "device": "cpu", "class": "cpu", "ms": -1}]}`, "bad number"},
		{"empty", `{"schema": 1, "section": "a", "results": [{"kind": "gemm", "case": "c", "impl": "vrun", "device": "cpu", "class": "cpu"}]}`, "no time"},
		{"truncated", `{"schema": 1, "sec`, "decode"},
	} {
		_, err := Decode(strings.NewReader(c.json))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one with %q", c.name, err, c.want)
		}
	}
}

func TestReplaceSection(t *testing.T) {
	doc := "# Title\n\nhand text\n<!-- suite:begin a -->\nold a\n<!-- suite:end a -->\nmiddle <!-- suite:begin b --> not a marker\n  <!-- suite:begin b -->  \nold b\nold b2\n<!-- suite:end b -->\ntail without newline"
	got, err := ReplaceSection(doc, "b", "new b")
	if err != nil {
		t.Fatal(err)
	}
	want := "# Title\n\nhand text\n<!-- suite:begin a -->\nold a\n<!-- suite:end a -->\nmiddle <!-- suite:begin b --> not a marker\n  <!-- suite:begin b -->  \nnew b\n<!-- suite:end b -->\ntail without newline"
	if got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	got, err = ReplaceSection(got, "a", "")
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(want, "old a\n", "", 1); got != want {
		t.Errorf("emptied section a: got\n%q\nwant\n%q", got, want)
	}
	for _, c := range []struct{ name, doc, want string }{
		{"missing", "text\n", "no markers"},
		{"no end", "<!-- suite:begin s -->\n", `0 lines "<!-- suite:end s -->"`},
		{"no begin", "<!-- suite:end s -->\n", `0 lines "<!-- suite:begin s -->"`},
		{"two begins", "<!-- suite:begin s -->\n<!-- suite:begin s -->\n<!-- suite:end s -->\n", "2 lines"},
		{"two ends", "<!-- suite:begin s -->\n<!-- suite:end s -->\n<!-- suite:end s -->\n", "2 lines"},
		{"order", "<!-- suite:end s -->\n<!-- suite:begin s -->\n", "comes before"},
		{"other name", "<!-- suite:begin s2 -->\n<!-- suite:end s2 -->\n", "no markers"},
	} {
		_, err := ReplaceSection(c.doc, "s", "x")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one with %q", c.name, err, c.want)
		}
	}
	if _, err := ReplaceSection("x\n", "s", "y"); !errors.Is(err, ErrNoMarkers) {
		t.Errorf("missing markers: %v is not ErrNoMarkers", err)
	}
}

// TestRenderCommand regenerates a section of a markdown file in place,
// appends a missing one with -append, and draws the PNG.
func TestRenderCommand(t *testing.T) {
	dir := t.TempDir()
	md := filepath.Join(dir, "b.md")
	png := filepath.Join(dir, "b.png")
	in := filepath.Join("testdata", "small.json")
	os.WriteFile(md, []byte("intro\n"), 0o644)
	var out, errb bytes.Buffer
	if code := mainErr([]string{"render", "-in", in, "-md", md}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "no markers") {
		t.Fatalf("render without markers: exit %d, %s", code, errb.String())
	}
	if code := mainErr([]string{"render", "-in", in, "-md", md, "-png", png, "-append"}, &out, &errb); code != 0 {
		t.Fatalf("render -append: exit %d, %s", code, errb.String())
	}
	b, _ := os.ReadFile(md)
	body := Markdown(readFixture(t))
	if want := "intro\n\n<!-- suite:begin fixture -->\n" + body + "<!-- suite:end fixture -->\n"; string(b) != want {
		t.Errorf("after -append:\n%s", b)
	}
	os.WriteFile(md, []byte("intro\n<!-- suite:begin fixture -->\nstale\n<!-- suite:end fixture -->\noutro\n"), 0o644)
	if code := mainErr([]string{"render", "-in", in, "-md", md}, &out, &errb); code != 0 {
		t.Fatalf("render: exit %d, %s", code, errb.String())
	}
	b, _ = os.ReadFile(md)
	if want := "intro\n<!-- suite:begin fixture -->\n" + body + "<!-- suite:end fixture -->\noutro\n"; string(b) != want {
		t.Errorf("after render:\n%s", b)
	}
	if _, err := os.Stat(png); err != nil {
		t.Error(err)
	}
	if code := mainErr([]string{"render", "-in", in + "," + in}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "twice") {
		t.Errorf("one section twice: exit %d, %s", code, errb.String())
	}
}

// TestRunQuick runs the suite's smoke test on the CPU backend without
// baselines and checks that the file it writes reads back and renders.
func TestRunQuick(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r.json")
	var so, se bytes.Buffer
	if code := mainErr([]string{"run", "-quick", "-backends", "cpu", "-baselines", "none", "-section", "smoke", "-out", out}, &so, &se); code != 0 {
		t.Fatalf("exit %d: %s", code, se.String())
	}
	f, err := ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, r := range f.Results {
		if r.Error != "" {
			t.Errorf("%s %s: %s", r.Kind, r.Case, r.Error)
		}
		if r.Impl != "vrun" || r.Device != "cpu:0" || r.Class != ClassCPU {
			t.Errorf("unexpected result %+v", r)
		}
		kinds[r.Kind]++
	}
	for _, k := range Kinds {
		if kinds[k] == 0 {
			t.Errorf("no %s results", k)
		}
	}
	if len(f.Baselines) != 3 || f.Baselines[0].Skipped == "" || f.Section != "smoke" || !f.Quick || f.Commit == "" {
		t.Errorf("header: %+v %+v", f.Baselines, f)
	}
	if md := Markdown(f); !strings.Contains(md, "| f32/n=64 | cpu:0 |") {
		t.Errorf("render:\n%s", md)
	}
}

// TestRunQuickNumPy runs the smoke test with the NumPy baseline, where
// there is a Python with NumPy: the baseline's cases come back and pair
// with vrun's.
func TestRunQuickNumPy(t *testing.T) {
	if py, why := python("numpy"); py == "" {
		t.Skip(why)
	}
	out := filepath.Join(t.TempDir(), "r.json")
	var so, se bytes.Buffer
	if code := mainErr([]string{"run", "-quick", "-backends", "cpu", "-baselines", "numpy", "-kinds", "gemm,gemv", "-out", out}, &so, &se); code != 0 {
		t.Fatalf("exit %d: %s", code, se.String())
	}
	f, err := ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range f.Baselines {
		if b.Name == "numpy" && b.Skipped != "" {
			t.Fatalf("numpy skipped: %s", b.Skipped)
		}
	}
	for _, kind := range []string{"gemm", "gemv"} {
		rows, impls := comparisons(f, kind)
		if len(rows) == 0 || len(impls) != 1 || impls[0] != "numpy" {
			t.Fatalf("%s: %d rows, baselines %v", kind, len(rows), impls)
		}
		for _, c := range rows {
			b, ok := c.base["numpy"]
			if _, rok := ratio(c.vrun, b); !ok || !rok {
				t.Errorf("%s %s: no NumPy ratio (%+v)", kind, c.vrun.Case, b)
			}
		}
	}
}

func FuzzDecode(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("testdata", "small.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"schema":1,"section":"x","results":[{"kind":"model","case":"m","impl":"vrun","device":"cpu:0","class":"cpu","ms":1}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Decode(bytes.NewReader(b))
		if err != nil {
			return
		}
		md := Markdown(file)
		if _, err := ReplaceSection(beginMarker(file.Section)+"\n"+endMarker(file.Section)+"\n", file.Section, md); err != nil {
			t.Fatal(err)
		}
		if w, h := ChartSize(chartBars([]*File{file})); w <= 0 || h <= 0 || h > 5000 {
			return
		}
		DrawChart([]*File{file})
	})
}

func FuzzReplaceSection(f *testing.F) {
	f.Add("a\n<!-- suite:begin s -->\nold\n<!-- suite:end s -->\nb\n", "new\n")
	f.Add("<!-- suite:end s -->\n<!-- suite:begin s -->", "")
	f.Fuzz(func(t *testing.T, doc, body string) {
		out, err := ReplaceSection(doc, "s", body)
		if err != nil {
			return
		}
		// Everything outside the markers is kept: the text up to the
		// begin marker's line and from the end marker's line on.
		bm, em := beginMarker("s"), endMarker("s")
		if !strings.Contains(out, bm) || !strings.Contains(out, em) {
			t.Fatalf("markers lost: %q", out)
		}
		again, err := ReplaceSection(out, "s", body)
		if err != nil || again != out {
			t.Fatalf("not idempotent: %v\n%q\n%q", err, out, again)
		}
	})
}

// TestTimingBatchesShortRuns checks that runs shorter than minSample are
// timed several to a sample (a coarse clock, as under Wine, would time a
// single one as 0 and the rates as +Inf) and the median is positive and
// finite.
func TestTimingBatchesShortRuns(t *testing.T) {
	calls := 0
	tm := timing{minRuns: 3, maxRuns: 3}
	ms, n, err := tm.median(func() error { calls++; return nil })
	if err != nil || n != 3 {
		t.Fatalf("median: %v, %d samples, want 3", err, n)
	}
	if !(ms > 0) || math.IsInf(ms, 0) {
		t.Errorf("median of an empty run = %v ms, want a positive finite time", ms)
	}
	if calls <= 2*n {
		t.Errorf("%d calls for %d samples: short runs were not batched", calls, n)
	}
}
