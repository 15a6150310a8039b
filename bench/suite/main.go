package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(mainErr(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage:
  suite run -out results.json [-backends cpu,vulkan:0,cuda:0,opencl:0] [-models dir|files] [-quick] [flags]
  suite render -in results.json[,more.json] [-md docs/benchmarks.md] [-png docs/bench.png] [-append]
Run 'suite run -h' or 'suite render -h' for the flags.`

func mainErr(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "run":
		err = runCmd(args[1:], stderr)
	case "render":
		err = renderCmd(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "suite: unknown command %q\n%s\n", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "suite:", err)
		return 1
	}
	return 0
}
