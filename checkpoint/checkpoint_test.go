package checkpoint

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/data"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// classifier is a small model with BatchNormalization and Dropout: x [B,
// 6], one-hot t [B, 3]; the batch dim is dynamic.
func classifier(t testing.TB) (*model.Model, []string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 6))
	b := model.NewBuilder()
	b.Input("x", rt.F32, -1, 6)
	b.Input("t", rt.F32, -1, 3)
	weight := func(name string, shape []int64, v []float64) string {
		return b.Weight(name, rt.F32, shape, rt.FromFloat64(rt.F32, v, len(v)).Data)
	}
	w := func(name string, shape ...int64) string {
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		v := make([]float64, n)
		for i := range v {
			v[i] = rng.NormFloat64() * 0.5
		}
		return weight(name, shape, v)
	}
	ones := []float64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	h := b.Op("Gemm", []string{"x", w("w1", 10, 6), w("b1", 10)}, model.Attrs{"transB": 1})
	h = b.Op("BatchNormalization", []string{h, w("g", 10), w("beta", 10), weight("rm", []int64{10}, make([]float64, 10)), weight("rv", []int64{10}, ones)}, nil)
	h = b.Op("Relu", []string{h}, nil)
	h = b.Op("Dropout", []string{h, weight("ratio", []int64{}, []float64{0.3})}, nil)
	ls := b.Op("LogSoftmax", []string{b.Op("MatMul", []string{h, w("w2", 10, 3)}, nil)}, model.Attrs{"axis": 1})
	b.Node("loss", "Neg", []string{b.Op("ReduceMean", []string{b.Op("Mul", []string{ls, "t"}, nil)}, model.Attrs{"keepdims": 0})}, []string{"loss"}, nil)
	b.Output("loss")
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m, []string{"w1", "b1", "g", "beta", "w2"}
}

// dataset is 60 samples of 6 features with one-hot targets of 3 classes.
func dataset() *data.Dataset {
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float64, 60*6)
	y := make([]float64, 60*3)
	for i := range 60 {
		c := rng.IntN(3)
		y[i*3+c] = 1
		for k := range 6 {
			x[i*6+k] = rng.NormFloat64() + float64(c*(k%2))
		}
	}
	return &data.Dataset{X: rt.FromFloat64(rt.F32, x, 60, 6), Y: rt.FromFloat64(rt.F32, y, 60, 3)}
}

// schedule is a step-decay learning-rate schedule whose state travels as
// the checkpoint's opaque scheduler JSON.
type schedule struct {
	Base  float64 `json:"base"`
	Every int     `json:"every"`
	Gamma float64 `json:"gamma"`
	Step  int     `json:"step"`
}

func (s *schedule) next() float64 {
	lr := s.Base * math.Pow(s.Gamma, float64(s.Step/s.Every))
	s.Step++
	return lr
}

type run struct {
	tr     *engine.Trainer
	loader *data.Loader
	sched  *schedule
	epoch  int
}

func newRun(t *testing.T, m *model.Model, params []string, dev rt.Device) *run {
	tr, err := engine.NewTrainer(m, dev, engine.TrainOptions{Loss: "loss", Params: params, Seed: 11, Shapes: map[string][]int{"x": {8, 6}, "t": {8, 3}},
		Optimizer: &engine.Optimizer{Kind: engine.Adam, LR: 0.05}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	l, err := data.NewLoader(dataset(), data.LoaderOptions{BatchSize: 8, Shuffle: true, Seed: 3, Prefetch: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &run{tr: tr, loader: l, sched: &schedule{Base: 0.05, Every: 4, Gamma: 0.5}}
}

// steps runs n training steps, across epochs (the last batch of each
// epoch is short: 60 = 7×8 + 4), and returns their losses.
func (r *run) steps(t *testing.T, n int) []float64 {
	var losses []float64
	for len(losses) < n {
		b, err := r.loader.Next()
		if errors.Is(err, io.EOF) {
			r.epoch++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		r.tr.SetLR(r.sched.next())
		res, err := r.tr.Step(context.Background(), map[string]*rt.Tensor{"x": b.X, "t": b.Y})
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, res.Loss)
	}
	return losses
}

// TestResumeBitIdentical trains 21 steps straight, and 10 steps, a
// checkpoint through a file, a new trainer and loader, and 11 more: the
// losses and the final weights, optimizer state and RNG state must be
// bit-identical on the CPU (Dropout masks, Adam moments, BatchNorm
// running statistics, the shuffle position and the schedule all matter).
func TestResumeBitIdentical(t *testing.T) {
	dev := cpu.NewDevice()
	defer dev.Close()
	m, params := classifier(t)
	const n, k = 21, 10

	straight := newRun(t, m, params, dev)
	want := straight.steps(t, n)

	first := newRun(t, m, params, dev)
	got := first.steps(t, k)
	c, err := Capture(first.tr)
	if err != nil {
		t.Fatal(err)
	}
	ls := first.loader.State()
	c.Loader, c.Epoch = &ls, first.epoch
	if c.Scheduler, err = json.Marshal(first.sched); err != nil {
		t.Fatal(err)
	}
	c.Meta = map[string]string{"model": "classifier"}
	path := filepath.Join(t.TempDir(), "ckpt.bin")
	if err := Write(path, c); err != nil {
		t.Fatal(err)
	}

	c2, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	second := newRun(t, m, params, dev)
	if err := c2.Restore(second.tr); err != nil {
		t.Fatal(err)
	}
	if err := second.loader.SetState(*c2.Loader); err != nil {
		t.Fatal(err)
	}
	second.epoch = c2.Epoch
	if err := json.Unmarshal(c2.Scheduler, second.sched); err != nil {
		t.Fatal(err)
	}
	got = append(got, second.steps(t, n-k)...)

	for i := range want {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			t.Fatalf("step %d: loss %v resumed, %v straight", i+1, got[i], want[i])
		}
	}
	if second.epoch != straight.epoch || second.epoch != 2 {
		t.Errorf("epochs %d and %d, want 2", second.epoch, straight.epoch)
	}
	a, _ := Capture(second.tr)
	b, _ := Capture(straight.tr)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("final weights or training state differ")
	}
	if len(a.Train.Optim) != 2 || len(a.Weights) != 7 || a.Train.Steps != n {
		t.Fatalf("%d optimizer buffers, %d weights, %d steps", len(a.Train.Optim), len(a.Weights), a.Train.Steps)
	}
	// The checkpoint mattered: a fresh trainer and loader diverge.
	fresh := newRun(t, m, params, dev)
	fresh.steps(t, 0)
	if l := fresh.steps(t, 1); l[0] == want[k] {
		t.Error("a fresh run reproduces step k+1: the test cannot see the checkpoint")
	}
}

func sampleCheckpoint() *Checkpoint {
	return &Checkpoint{
		Weights: map[string]*rt.Tensor{
			"w": rt.FromFloat64(rt.F32, []float64{1, -2, 3.5, math.Inf(1), 0, 6}, 2, 3),
			"s": rt.FromFloat64(rt.F64, []float64{math.Pi}),
			"e": rt.FromFloat64(rt.F16, nil, 0, 4),
		},
		Train: &engine.TrainState{Steps: 17, LR: 0.1 + 0.2, Params: []string{"w"}, RNG: []byte("pcg:\x00\x01\x02\xff"),
			Optim: map[string]*rt.Tensor{"exp_avg": rt.FromFloat64(rt.F32, []float64{0.5, 0.25, 1e-30, 0, 0, 1}, 6)}},
		Epoch:     3,
		Loader:    &data.LoaderState{Epoch: 3, Batch: 7, Seed: math.MaxUint64, Samples: 60000, BatchSize: 64},
		Scheduler: json.RawMessage(`{"kind":"cosine","t":[1,2.5]}`),
		Meta:      map[string]string{"model": "lenet", "cmd": "vrun train …"},
	}
}

func TestEncodeDecode(t *testing.T) {
	c := sampleCheckpoint()
	var buf bytes.Buffer
	if err := Encode(&buf, c); err != nil {
		t.Fatal(err)
	}
	got, err := Decode(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip differs:\n%+v\n%+v", got, c)
	}
	if got.Train.LR != 0.1+0.2 { // float64 bits survive the JSON header
		t.Fatalf("lr %v", got.Train.LR)
	}
	// Minimal: no loader, scheduler, meta, optimizer state or weights.
	min := &Checkpoint{Weights: map[string]*rt.Tensor{}, Train: &engine.TrainState{Params: []string{}, Optim: map[string]*rt.Tensor{}}}
	buf.Reset()
	Encode(&buf, min)
	if got, err := Decode(buf.Bytes()); err != nil || !reflect.DeepEqual(got, min) {
		t.Fatalf("minimal checkpoint: %v\n%+v", err, got)
	}
	if err := Encode(io.Discard, &Checkpoint{}); err == nil {
		t.Error("a checkpoint without training state encoded")
	}
	bad := sampleCheckpoint()
	bad.Scheduler = json.RawMessage(`{"a":`)
	if err := Encode(io.Discard, bad); err == nil {
		t.Error("invalid scheduler JSON encoded")
	}
}

// TestCorrupt checks that every single-byte change and every truncation
// of a checkpoint is caught with a clear error.
func TestCorrupt(t *testing.T) {
	var buf bytes.Buffer
	Encode(&buf, sampleCheckpoint())
	good := buf.Bytes()
	for i := range good {
		b := bytes.Clone(good)
		b[i] ^= 0x20
		_, err := Decode(b)
		switch {
		case i >= 8 && i < 12:
			if !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), "this build reads version 1") {
				t.Fatalf("byte %d: err = %v, want ErrVersion", i, err)
			}
		case !errors.Is(err, ErrCorrupt):
			t.Fatalf("byte %d changed: err = %v, want ErrCorrupt", i, err)
		}
	}
	for n := range len(good) {
		if _, err := Decode(good[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: err = %v", n, err)
		}
	}
	p := filepath.Join(t.TempDir(), "c.bin")
	os.WriteFile(p, good[:len(good)-9], 0o644)
	if _, err := Read(p); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "damaged or truncated") {
		t.Fatalf("Read of a truncated file: %v", err)
	}
	if _, err := Decode([]byte("PK\x03\x04 a zip")); err == nil || !strings.Contains(err.Error(), "not a vrun checkpoint") {
		t.Fatalf("not a checkpoint: %v", err)
	}
}

// TestCorruptRestore: a checkpoint of another model restores with an
// error and leaves the trainer usable.
func TestRestoreMismatch(t *testing.T) {
	dev := cpu.NewDevice()
	defer dev.Close()
	m, params := classifier(t)
	r := newRun(t, m, params, dev)
	c := sampleCheckpoint()
	if err := c.Restore(r.tr); err == nil {
		t.Fatal("a foreign checkpoint restored")
	}
	r.steps(t, 2)
}

// TestWriteAtomic checks that Write replaces an older checkpoint, leaves
// no temporary file, and on failure leaves the old file untouched.
func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "ckpt")
	c := sampleCheckpoint()
	if err := Write(p, c); err != nil {
		t.Fatal(err)
	}
	c.Epoch = 4
	if err := Write(p, c); err != nil {
		t.Fatal(err)
	}
	got, err := Read(p)
	if err != nil || got.Epoch != 4 {
		t.Fatalf("after replacing: %v, epoch %d", err, got.Epoch)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("folder holds %d entries, want only the checkpoint", len(entries))
	}
	if st, err := os.Stat(p); err != nil {
		t.Error(err)
	} else if runtime.GOOS != "windows" && st.Mode().Perm() != 0o644 {
		t.Errorf("the checkpoint's mode is %v, want 0644", st.Mode().Perm())
	}
	before, _ := os.ReadFile(p)
	// Failures: an unencodable checkpoint, a target that is a folder, a
	// folder that does not exist, a folder that cannot be written.
	bad := sampleCheckpoint()
	bad.Train.LR = math.NaN()
	if err := Write(p, bad); err == nil {
		t.Error("NaN learning rate written")
	}
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	if err := Write(filepath.Join(dir, "sub"), c); err == nil {
		t.Error("written over a folder")
	}
	if err := Write(filepath.Join(dir, "missing", "ckpt"), c); err == nil {
		t.Error("written into a missing folder")
	}
	if runtime.GOOS != "windows" && os.Getuid() != 0 {
		ro := filepath.Join(dir, "ro")
		os.Mkdir(ro, 0o555)
		if err := Write(filepath.Join(ro, "ckpt"), c); err == nil {
			t.Error("written into a read-only folder")
		}
	}
	after, _ := os.ReadFile(p)
	if !bytes.Equal(before, after) {
		t.Error("a failed write changed the old checkpoint")
	}
	entries, _ = os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
	if sub, _ := os.ReadDir(filepath.Join(dir, "sub")); len(sub) != 0 {
		t.Errorf("%d files left in sub", len(sub))
	}
}

// FuzzDecode checks that Decode never panics, and that what it accepts
// encodes and decodes to the same checkpoint. Each input is tried as is
// and with a valid checksum appended, so that the fuzzer reaches the
// header and tensor table behind the checksum.
func FuzzDecode(f *testing.F) {
	var buf bytes.Buffer
	Encode(&buf, sampleCheckpoint())
	f.Add(buf.Bytes())
	buf.Reset()
	Encode(&buf, &Checkpoint{Train: &engine.TrainState{}})
	f.Add(buf.Bytes())
	f.Add([]byte(Magic + "\x01\x00\x00\x00\x02\x00\x00\x00{}"))
	f.Add(buf.Bytes()[:buf.Len()-4])
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzOne(t, b)
		fuzzOne(t, binary.LittleEndian.AppendUint32(bytes.Clone(b), crc32.Checksum(b, castagnoli)))
	})
}

func fuzzOne(t *testing.T, b []byte) {
	{
		c, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
				t.Fatalf("error wraps neither ErrCorrupt nor ErrVersion: %v", err)
			}
			return
		}
		var out bytes.Buffer
		if err := Encode(&out, c); err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		c2, err := Decode(out.Bytes())
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatal("round trip differs")
		}
	}
}
