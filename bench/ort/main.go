// Command ort times vrun's CPU backend beside onnxruntime (npm
// onnxruntime-node) on the same models, inputs and thread count, and prints
// a table of median latencies with their ratio (vrun / onnxruntime: above
// 1 means vrun is slower).
//
//	go run ./bench/ort [-threads 2] [-runs 30] [-rounds 3] [-short] [-models a,b] [-profile N [-top M]] [extra.onnx ...]
//
// The models are every testdata/models/NAME.onnx with its input
// NAME.x.npy, and the end-to-end models testdata/e2e/NAME.bin with
// NAME/x.npy (exported to ONNX with package export for onnxruntime), plus
// any ONNX files named on the command line (fed deterministic random
// inputs, dynamic dims bound to 1). vrun runs with GOMAXPROCS = -threads;
// onnxruntime with -threads intra-op threads, one inter-op thread, the
// sequential executor and its default graph optimisations.
//
// Each round runs every model -runs times on vrun, then -runs times on
// onnxruntime (after warm-up), and takes each side's median; the table
// shows the smallest median over the rounds (on a shared machine the
// least disturbed round), so run it on a quiet machine or read the ratio,
// not the times. The outputs of both are compared (max |Δ| relative to the
// output's largest magnitude).
//
// -profile N then lists, for each model, the -top nodes by median time
// over N runs on vrun (per-Launch times, with each node's 90th
// percentile: a p90 far above the median, with the run's median above
// the sum of the nodes' medians, points at waits rather than kernels)
// and in onnxruntime (its own
// profiler's kernel times, with each node's op and output shape; its
// nodes are those after its graph optimisations, a Conv with a fused
// activation in NCHWc layout named after the activation).
//
// onnxruntime-node is looked up in $VRUN_ORT_NODE_MODULES or .ort/node_modules
// at the repository root (npm install --ignore-scripts --prefix .ort
// onnxruntime-node, as test.sh does). Without node or onnxruntime-node the
// command prints why and exits 0, so that CI can run it as a report.
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/vrun-go/vrun"
	"github.com/vrun-go/vrun/bench/internal/ortpeer"
	"github.com/vrun-go/vrun/rt"
)

// profileTop is the -top flag.
var profileTop *int

func main() {
	threads := flag.Int("threads", 2, "threads for both vrun (GOMAXPROCS) and onnxruntime (intra-op)")
	runs := flag.Int("runs", 30, "timed runs per model, side and round")
	rounds := flag.Int("rounds", 3, "rounds; the table shows each side's smallest median")
	short := flag.Bool("short", false, "a quick report (CI): -runs 10 -rounds 1 unless given")
	only := flag.String("models", "", "comma-separated model names to run (default: all)")
	profileTop = flag.Int("top", 10, "with -profile, the `number` of nodes listed")
	profile := flag.Int("profile", 0, "after the table, profile each model over `N` runs on vrun and in onnxruntime: per-node median times")
	flag.Parse()
	if *short {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["runs"] {
			*runs = 10
		}
		if !set["rounds"] {
			*rounds = 1
		}
	}
	if err := run(*threads, *runs, *rounds, *profile, *only, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "bench/ort:", err)
		os.Exit(1)
	}
}

func run(threads, runs, rounds, profile int, only string, extra []string) error {
	ortRT, ok, why := ortpeer.FindNode()
	if !ok {
		fmt.Printf("bench/ort: skipped: %s\n", why)
		return nil
	}
	runtime.GOMAXPROCS(threads)
	tmp, err := os.MkdirTemp("", "vrun-bench-ort")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	models, err := findModels(tmp, only, extra)
	if err != nil {
		return err
	}
	defer func() {
		for _, m := range models {
			m.Close()
		}
	}()
	ort, err := ortpeer.Start(ortRT)
	if err != nil {
		return err
	}
	defer ort.Close()

	type result struct {
		vrun, ort []float64 // median per round, ms
		diff      float64
		err       string
		sess      *vrun.Model
		id        int
	}
	res := make([]*result, len(models))
	ver := ""
	for i, m := range models {
		r := &result{}
		res[i] = r
		shapes := map[string][]int{}
		for name, t := range m.Inputs {
			shapes[name] = t.Shape
		}
		s, err := vrun.New(m.Graph, vrun.Options{Device: "cpu", Shapes: shapes})
		if err != nil {
			r.err = "vrun: " + firstLine(err)
			continue
		}
		r.sess = s
		got, err := s.Run(context.Background(), m.Inputs)
		if err != nil {
			r.err = "vrun: " + firstLine(err)
			continue
		}
		id, outs, v, err := ort.Load(m.ONNX, threads, m.Inputs)
		if err != nil {
			r.err = "onnxruntime: " + firstLine(err)
			continue
		}
		ver, r.id = v, id
		r.diff = ortpeer.MaxDiff(got, outs)
	}
	defer func() {
		for _, r := range res {
			if r.sess != nil {
				r.sess.Close()
			}
		}
	}()
	ctx := context.Background()
	for round := 0; round < rounds; round++ {
		for i, m := range models {
			r := res[i]
			if r.err != "" {
				continue
			}
			ms, err := timeVrun(ctx, r.sess, m.Inputs, runs)
			if err != nil {
				r.err = "vrun: " + firstLine(err)
				continue
			}
			r.vrun = append(r.vrun, ortpeer.Median(ms))
			if ms, err = ort.Bench(r.id, runs); err != nil {
				r.err = "onnxruntime: " + firstLine(err)
				continue
			}
			r.ort = append(r.ort, ortpeer.Median(ms))
		}
	}

	load := ""
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	fmt.Printf("vrun cpu vs onnxruntime-node %s, %d threads each, median of %d runs, best of %d rounds (load average %s)\n",
		ver, threads, runs, rounds, load)
	fmt.Printf("%-16s %12s %12s %10s %10s\n", "model", "vrun ms", "ort ms", "vrun/ort", "max|Δ|")
	for i, m := range models {
		r := res[i]
		if r.err != "" {
			fmt.Printf("%-16s %s\n", m.Name, r.err)
			continue
		}
		v, o := minOf(r.vrun), minOf(r.ort)
		fmt.Printf("%-16s %12.3f %12.3f %10.2f %10.2g\n", m.Name, v, o, v/o, r.diff)
	}
	if profile > 0 {
		for _, m := range models {
			if err := profileModel(ctx, m, profile); err != nil {
				fmt.Printf("%s: profile: %v\n", m.Name, firstLine(err))
			}
			if err := profileORT(ort, m, threads, profile); err != nil {
				fmt.Printf("%s: onnxruntime profile: %v\n", m.Name, firstLine(err))
			}
		}
	}
	return nil
}

// profileModel runs m n times with per-node times and prints the nodes
// with the largest median, which a single run's profile (vrun -profile)
// cannot give on a shared machine.
func profileModel(ctx context.Context, m *ortpeer.Model, n int) error {
	shapes := map[string][]int{}
	for name, t := range m.Inputs {
		shapes[name] = t.Shape
	}
	s, err := vrun.New(m.Graph, vrun.Options{Device: "cpu", Shapes: shapes, Profile: true})
	if err != nil {
		return err
	}
	defer s.Close()
	times := map[string][]float64{}
	ops := map[string]string{}
	var walls, sums []float64
	for i := 0; i < n+3; i++ {
		t0 := time.Now()
		if _, err := s.Run(ctx, m.Inputs); err != nil {
			return err
		}
		wall := time.Since(t0)
		if i < 3 {
			continue
		}
		sum := 0.0
		for _, p := range s.Profile() {
			times[p.Node] = append(times[p.Node], float64(p.Time)/1e6)
			ops[p.Node] = p.Op
			sum += float64(p.Time) / 1e6
		}
		walls, sums = append(walls, float64(wall)/1e6), append(sums, sum)
	}
	type row struct {
		node     string
		med, p90 float64
	}
	var rows []row
	total := 0.0
	for node, ts := range times {
		q := ortpeer.Quantiles(ts, 0.5, 0.9)
		rows = append(rows, row{node, q[0], q[1]})
		total += q[0]
	}
	sort.Slice(rows, func(a, b int) bool { return rows[a].med > rows[b].med })
	fmt.Printf("\n%s: %d nodes, sum of per-node medians %.3f ms over %d runs (median per run: nodes %.3f ms, Run %.3f ms)\n",
		m.Name, len(rows), total, n, ortpeer.Median(sums), ortpeer.Median(walls))
	for _, r := range rows[:min(*profileTop, len(rows))] {
		fmt.Printf("  %9.4f ms %5.1f%%  %-14s %s (p90 %.4f)\n", r.med, 100*r.med/total, ops[r.node], r.node, r.p90)
	}
	byOp := map[string]float64{}
	for _, r := range rows {
		byOp[ops[r.node]] += r.med
	}
	printByOp(byOp, total)
	return nil
}

// profileORT prints onnxruntime's profile of m over n runs (its per-node
// median kernel times, after its graph optimisations: a Conv with a fused
// activation in NCHWc layout is named after the activation), in
// profileModel's format with each node's op and output shape, so that
// the two can be read side by side.
func profileORT(ort *ortpeer.Peer, m *ortpeer.Model, threads, n int) error {
	nodes, err := ort.Profile(m.ONNX, threads, m.Inputs, n)
	if err != nil {
		return err
	}
	total := 0.0
	byOp := map[string]float64{}
	for _, nt := range nodes {
		total += nt.MS
		byOp[nt.Op] += nt.MS
	}
	fmt.Printf("%s, onnxruntime: %d nodes, sum of per-node medians %.3f ms over %d runs\n", m.Name, len(nodes), total, n)
	for _, nt := range nodes[:min(*profileTop, len(nodes))] {
		fmt.Printf("  %9.4f ms %5.1f%%  %-14s %-16s %s\n", nt.MS, 100*nt.MS/total, nt.Op, nt.Shape, nt.Node)
	}
	printByOp(byOp, total)
	return nil
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// findModels lists the repository's benchmark models and the extra ONNX
// files (fed deterministic random inputs), exporting model.bin files to
// ONNX in tmp.
func findModels(tmp, only string, extra []string) ([]*ortpeer.Model, error) {
	out, err := ortpeer.RepoModels(tmp, ortpeer.Keep(only))
	if err != nil {
		return nil, err
	}
	for _, p := range extra {
		name := strings.TrimSuffix(filepath.Base(p), filepath.Ext(p))
		m, err := ortpeer.LoadModel(name, p, "", "")
		if err == nil {
			err = m.ExportONNX(tmp)
		}
		if err != nil {
			for _, m := range out {
				m.Close()
			}
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func timeVrun(ctx context.Context, s *vrun.Model, in map[string]*rt.Tensor, runs int) ([]float64, error) {
	for i := 0; i < 3; i++ {
		if _, err := s.Run(ctx, in); err != nil {
			return nil, err
		}
	}
	ms := make([]float64, runs)
	for i := range ms {
		t0 := time.Now()
		if _, err := s.Run(ctx, in); err != nil {
			return nil, err
		}
		ms[i] = float64(time.Since(t0)) / 1e6
	}
	return ms, nil
}

func minOf(v []float64) float64 {
	m := math.Inf(1)
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

// printByOp prints each op's share of total, largest first.
func printByOp(byOp map[string]float64, total float64) {
	opNames := make([]string, 0, len(byOp))
	for op := range byOp {
		opNames = append(opNames, op)
	}
	sort.Slice(opNames, func(a, b int) bool { return byOp[opNames[a]] > byOp[opNames[b]] })
	fmt.Printf("  by op:")
	for _, op := range opNames {
		fmt.Printf(" %s %.1f%%", op, 100*byOp[op]/total)
	}
	fmt.Println()
}
