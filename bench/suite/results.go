package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
)

// SchemaVersion is the version of the results file this program writes
// and reads.
const SchemaVersion = 1

// File is one run of the suite: the JSON object `suite run` writes and
// `suite render` reads. See the package documentation for the schema.
type File struct {
	Schema  int    `json:"schema"`
	Section string `json:"section"`
	Date    string `json:"date"`
	Commit  string `json:"commit"`
	Quick   bool   `json:"quick,omitempty"`
	Threads int    `json:"threads"`
	// Env holds the VRUN_* environment variables of the run (switches
	// such as VRUN_VK_TUNE=1), sorted.
	Env       []string   `json:"env,omitempty"`
	Machine   Machine    `json:"machine"`
	Devices   []Device   `json:"devices"`
	Baselines []Baseline `json:"baselines"`
	Results   []Result   `json:"results"`
}

// Machine describes the host the suite ran on.
type Machine struct {
	Host    string `json:"host"`
	OS      string `json:"os"`
	Arch    string `json:"arch"`
	CPU     string `json:"cpu,omitempty"`
	CPUs    int    `json:"cpus"`
	LoadAvg string `json:"load_avg,omitempty"`
	Go      string `json:"go"`
}

// Device is a vrun device the suite ran on, or one it skipped.
type Device struct {
	Spec    string `json:"spec"`
	Name    string `json:"name,omitempty"`
	Kind    string `json:"kind,omitempty"`
	Class   string `json:"class,omitempty"`
	Driver  string `json:"driver,omitempty"`
	Skipped string `json:"skipped,omitempty"`
}

// Baseline is a peer the suite ran beside vrun (numpy, pytorch,
// onnxruntime) on one class of device, or one it skipped and why.
type Baseline struct {
	Name    string `json:"name"`
	Class   string `json:"class"`
	Version string `json:"version,omitempty"`
	Device  string `json:"device,omitempty"`
	Skipped string `json:"skipped,omitempty"`
}

// Result is one measurement: a case of a kind, timed on one
// implementation and device.
type Result struct {
	Kind   string  `json:"kind"`
	Case   string  `json:"case"`
	Batch  int     `json:"batch,omitempty"`
	Impl   string  `json:"impl"`
	Device string  `json:"device"`
	Class  string  `json:"class"`
	MS     float64 `json:"ms,omitempty"`
	Rate   float64 `json:"rate,omitempty"`
	Unit   string  `json:"unit,omitempty"`
	Runs   int     `json:"runs,omitempty"`
	Error  string  `json:"error,omitempty"`
}

// Kinds are the result kinds, in the order the tables show them.
var Kinds = []string{"gemm", "gemv", "conv", "model"}

// Classes of devices: vrun's device of kind CPU (the CPU backend,
// lavapipe, pocl) compares with baselines that ran on the CPU, a GPU with
// those that ran on a GPU.
const (
	ClassCPU = "cpu"
	ClassGPU = "gpu"
)

var sectionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Validate checks what render relies on: the schema version, a section
// name usable in a marker, known kinds and classes, finite non-negative
// numbers, and a value for every result without an error.
func (f *File) Validate() error {
	if f.Schema != SchemaVersion {
		return fmt.Errorf("schema %d, want %d", f.Schema, SchemaVersion)
	}
	if !sectionRE.MatchString(f.Section) {
		return fmt.Errorf("section %q: want 1 to 64 letters, digits, '.', '_' or '-'", f.Section)
	}
	for i, r := range f.Results {
		where := fmt.Sprintf("result %d (%s %s on %s %s)", i, r.Kind, r.Case, r.Impl, r.Device)
		if !knownKind(r.Kind) {
			return fmt.Errorf("%s: unknown kind %q", where, r.Kind)
		}
		if r.Class != ClassCPU && r.Class != ClassGPU {
			return fmt.Errorf("%s: class %q, want cpu or gpu", where, r.Class)
		}
		if r.Case == "" || r.Impl == "" || r.Device == "" {
			return fmt.Errorf("%s: case, impl and device must be set", where)
		}
		for _, v := range []float64{r.MS, r.Rate} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return fmt.Errorf("%s: bad number %v", where, v)
			}
		}
		if r.Batch < 0 || r.Runs < 0 {
			return fmt.Errorf("%s: negative batch or runs", where)
		}
		if r.Error == "" && r.MS == 0 && r.Rate == 0 {
			return fmt.Errorf("%s: no time, rate or error", where)
		}
	}
	return nil
}

func knownKind(k string) bool {
	for _, x := range Kinds {
		if x == k {
			return true
		}
	}
	return false
}

// Decode reads a results file: one JSON object, unknown fields
// rejected, then validated.
func Decode(r io.Reader) (*File, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return nil, errors.New("decode: more than one JSON value")
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("invalid results: %w", err)
	}
	return &f, nil
}

// ReadFile reads and validates the results file at path.
func ReadFile(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Decode(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Encode writes f as indented JSON.
func (f *File) Encode(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(f)
}

// WriteFile writes f to path, through a temporary file in the same
// directory so that a failed run leaves no half-written file.
func (f *File) WriteFile(path string) error {
	var buf bytes.Buffer
	if err := f.Encode(&buf); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
