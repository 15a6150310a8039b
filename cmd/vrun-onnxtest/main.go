package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"

	"github.com/vrun-go/vrun/internal/onnxcorpus"
	"github.com/vrun-go/vrun/rt"

	// Every backend, as package vrun registers them: -device picks one.
	_ "github.com/vrun-go/vrun/clshim"
	_ "github.com/vrun-go/vrun/cpu"
	_ "github.com/vrun-go/vrun/cudashim"
	_ "github.com/vrun-go/vrun/rt/vulkan"
)

func main() {
	device := flag.String("device", "cpu", "device: cpu, vulkan, vulkan:N, cuda:N, opencl:N, auto")
	path := flag.String("corpus", "", "corpus .tgz or directory of cases (default: $"+onnxcorpus.Env+" or ../shared/onnx-node-tests.tgz)")
	runRe := flag.String("run", "", "run only cases whose name matches `regexp`")
	verbose := flag.Bool("v", false, "print every case's outcome")
	list := flag.String("list", "", "print only the names of cases that `pass`, fail or skip")
	flag.Parse()
	if err := run(*device, *path, *runRe, *list, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "vrun-onnxtest:", err)
		os.Exit(1)
	}
}

func run(device, path, runRe, list string, verbose bool) error {
	if path == "" {
		p, ok := onnxcorpus.Find()
		if !ok {
			return fmt.Errorf("corpus not found at %s; give -corpus or set %s", p, onnxcorpus.Env)
		}
		path = p
	}
	var corpus *onnxcorpus.Corpus
	var err error
	if st, serr := os.Stat(path); serr == nil && st.IsDir() {
		corpus, err = onnxcorpus.OpenDir(path)
	} else {
		corpus, err = onnxcorpus.Open(path)
	}
	if err != nil {
		return err
	}
	var match func(string) bool
	if runRe != "" {
		re, err := regexp.Compile(runRe)
		if err != nil {
			return err
		}
		match = re.MatchString
	}
	dev, err := rt.Open(device, nil)
	if err != nil {
		return err
	}
	defer dev.Close()
	rep := onnxcorpus.Run(corpus, dev, match)
	if list != "" {
		st := map[string]onnxcorpus.Status{"pass": onnxcorpus.Pass, "fail": onnxcorpus.Fail, "skip": onnxcorpus.Skip}
		s, ok := st[list]
		if !ok {
			return fmt.Errorf("-list %q: want pass, fail or skip", list)
		}
		for _, n := range rep.Names(s) {
			fmt.Println(n)
		}
		return nil
	}
	if verbose {
		for _, r := range rep.Results {
			fmt.Printf("%-4s %s", r.Status, r.Case)
			if r.Reason != "" {
				fmt.Printf(": %s", r.Reason)
			}
			fmt.Println()
		}
	}
	fmt.Printf("%s on %s (%s)\n", path, dev.Info().Name, device)
	fmt.Print(rep.String())
	for _, r := range rep.Results {
		if _, known := onnxcorpus.KnownFailures[r.Case]; r.Status == onnxcorpus.Fail && !known {
			os.Exit(1)
		}
	}
	return nil
}
