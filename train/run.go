package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/vrun-go/vrun/checkpoint"
	"github.com/vrun-go/vrun/data"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/nn"
	"github.com/vrun-go/vrun/rt"
)

// Config configures Run.
type Config struct {
	// Net is the model to train, with its loss (NewNet).
	Net *Net
	// Device runs the training steps. The caller keeps ownership.
	Device rt.Device
	// Devices, with two or more devices, trains data-parallel over them
	// (engine.NewDataParallel): each step's batch is split between the
	// devices, their gradients are reduced (the mean weighted by share
	// size, equal to the whole batch's gradient) and the update runs on
	// Devices[0], whose weights are copied to the others — or, on CUDA
	// devices with NCCL, all-reduced on the GPUs and applied by every
	// device (see Collective). Device must then
	// be nil or Devices[0]. Validation runs on Devices[0]. BatchNorm
	// layers normalise each device's share by its own statistics. The
	// caller keeps ownership.
	Devices []rt.Device
	// BucketBytes is the bucket size of the data-parallel gradient
	// reduction (engine.TrainOptions.BucketBytes); 0 means
	// dist.DefaultGradBucketBytes (25 MB).
	BucketBytes int64
	// Collective is the data-parallel all-reduce: "" (NCCL where every
	// device is a CUDA GPU of its own and libnccl loads, else the host),
	// "host" or "nccl" (engine.TrainOptions.Collective).
	Collective string
	// NoOverlap reduces the data-parallel gradients after the whole
	// backward pass instead of bucket by bucket while backward still runs
	// (engine.TrainOptions.NoOverlap).
	NoOverlap bool
	// Optimizer is the update rule; zero hyperparameters take
	// torch.optim's defaults. LR must be set.
	Optimizer engine.Optimizer
	// Schedule, if set, gives the learning rate of each step (its
	// argument is the 0-based step count) in place of Optimizer.LR.
	Schedule nn.Schedule

	// Train is the training set. Val, if set, is evaluated after each
	// epoch.
	Train, Val *data.Dataset
	// BatchSize is the number of samples per step; the last batch of an
	// epoch may be shorter.
	BatchSize int
	// Epochs is the number of passes over Train (counting the epochs a
	// resumed run had done).
	Epochs int
	// Shuffle draws a new order of the samples each epoch, from Seed.
	Shuffle bool
	// Seed seeds the shuffling, the augmentation and the Dropout masks.
	Seed uint64
	// Mean and Std normalise the inputs per channel, CropPadding and
	// HFlip augment training images (data.LoaderOptions). U8 inputs are
	// first divided by 255.
	Mean, Std   []float64
	CropPadding int
	HFlip       bool

	// Log, if set, receives the CSV header "step,epoch,loss,lr" and a row
	// per step: the step count (from 1), the epoch (from 1), the loss of
	// the batch before the update and the learning rate of the step.
	Log io.Writer
	// Progress, if set, is called after each step and at the end of each
	// epoch.
	Progress func(Progress)

	// CheckpointDir, if set, receives DIR/last.ckpt (the folder is
	// created) when ctx is cancelled, at the end of every epoch with
	// EpochCheckpoints, and every CheckpointEvery steps when positive.
	CheckpointDir    string
	EpochCheckpoints bool
	CheckpointEvery  int
	// Resume continues the run that wrote the checkpoint: weights,
	// optimizer state, step count, epoch, data position, history.
	Resume *checkpoint.Checkpoint
	// Meta is stored in checkpoints.
	Meta map[string]string

	// DetectNaN snapshots the trainer before each step and checks the
	// weights after it; when a step makes a NaN or an infinity, it
	// replays the step with every intermediate tensor read back and
	// names the first op that produced one (NaNError.Op).
	DetectNaN bool
	// Profile records per-op device times (Result.Profile).
	Profile bool
}

// Progress reports a training run's position.
type Progress struct {
	Epoch, Epochs  int // from 1
	Batch, Batches int // within the epoch, from 1
	Step, Steps    int // optimizer steps, from 1; Steps is the run's total
	Loss, LR       float64
	SamplesPerSec  float64
	Elapsed, ETA   time.Duration
	// EpochDone is set on the call at the end of an epoch.
	EpochDone *EpochStats
}

// Metrics are a loss and, for classification losses (cross_entropy,
// nll, bce), an accuracy.
type Metrics struct {
	Loss     float64 `json:"loss"`
	Accuracy float64 `json:"accuracy"` // NaN when the loss has none
	Samples  int     `json:"samples"`
}

// HasAccuracy reports whether Accuracy is meaningful.
func (m Metrics) HasAccuracy() bool { return !math.IsNaN(m.Accuracy) }

// EpochStats are the results of one epoch.
type EpochStats struct {
	Epoch int     `json:"epoch"` // from 1
	Train Metrics `json:"train"` // means over the epoch's steps (before each update)
	// Val is the validation set after the epoch (Samples 0 without one).
	Val     Metrics       `json:"val"`
	Seconds float64       `json:"seconds"` // training time, validation excluded
	Time    time.Duration `json:"-"`
}

// String is the epoch's one-line summary: "train loss 0.4123 acc 87.50%,
// val loss 0.3870 acc 89.10% (1.2 s)" (accuracies where the loss has them,
// the validation part with a validation set).
func (e EpochStats) String() string {
	s := fmt.Sprintf("train loss %.4f", e.Train.Loss)
	if e.Train.HasAccuracy() {
		s += fmt.Sprintf(" acc %.2f%%", 100*e.Train.Accuracy)
	}
	if e.Val.Samples > 0 {
		s += fmt.Sprintf(", val loss %.4f", e.Val.Loss)
		if e.Val.HasAccuracy() {
			s += fmt.Sprintf(" acc %.2f%%", 100*e.Val.Accuracy)
		}
	}
	return s + fmt.Sprintf(" (%.1f s)", e.Seconds)
}

// Result is what Run returns.
type Result struct {
	// Epochs holds every epoch's results, of a resumed run's earlier
	// epochs too.
	Epochs []EpochStats
	// Losses holds each step's loss, in order (from the first step of
	// the run, also when resumed).
	Losses []float64
	// Final is the validation set's metrics after the last epoch (the
	// training set's, without a validation set).
	Final Metrics
	// Weights are the trained parameters and running statistics.
	Weights map[string]*rt.Tensor
	// Steps is the number of optimizer steps.
	Steps int
	// Interrupted is set when ctx was cancelled; Checkpoint names the
	// checkpoint written then.
	Interrupted bool
	Checkpoint  string
	// Profile holds the per-op times of the last step (Config.Profile).
	Profile []engine.OpTime
	// Info describes the training plan.
	Info engine.Info
}

// ErrInterrupted is returned, wrapped, when ctx is cancelled: the run
// wrote a checkpoint (with Config.CheckpointDir) and stopped between two
// steps.
var ErrInterrupted = errors.New("training interrupted")

// NaNError reports a loss or a weight that became NaN or infinite.
type NaNError struct {
	// Step is the step (from 1) that produced it, in Epoch and Batch
	// (from 1).
	Step, Epoch, Batch int
	Loss               float64
	// Op describes the first op that produced a non-finite value, with
	// Config.DetectNaN; "" otherwise.
	Op string
}

func (e *NaNError) Error() string {
	s := fmt.Sprintf("step %d (epoch %d, batch %d): the loss is %g", e.Step, e.Epoch, e.Batch, e.Loss)
	if !math.IsNaN(e.Loss) && !math.IsInf(e.Loss, 0) {
		s = fmt.Sprintf("step %d (epoch %d, batch %d): the loss is %g but the update made a weight non-finite", e.Step, e.Epoch, e.Batch, e.Loss)
	}
	if e.Op != "" {
		return s + "; " + e.Op
	}
	return s + "; training again with NaN detection (vrun train -detect-nan) names the op that produced it"
}

// CheckpointFile is the file name of the checkpoint in a checkpoint
// folder.
const CheckpointFile = "last.ckpt"

// Checkpoint metadata keys that Run reads back when resuming.
const (
	metaHistory = "train.history" // JSON []EpochStats
	metaLosses  = "train.losses"  // JSON []float64 (each step's loss)
	metaPartial = "train.partial" // JSON partial: the current epoch so far
	metaLoss    = "train.loss"    // the loss name
)

// partial accumulates an epoch's training metrics.
type partial struct {
	Loss    float64 `json:"loss"` // sum of batch loss × batch size
	Hits    int     `json:"hits"`
	Total   int     `json:"total"` // accuracy denominator
	Samples int     `json:"samples"`
	Seconds float64 `json:"seconds"`
}

func (p partial) metrics(acc bool) Metrics {
	m := Metrics{Loss: p.Loss / float64(max(p.Samples, 1)), Accuracy: math.NaN(), Samples: p.Samples}
	if acc && p.Total > 0 {
		m.Accuracy = float64(p.Hits) / float64(p.Total)
	}
	return m
}

// run is one call of Run.
type run struct {
	cfg     Config
	net     *Net
	tr      *engine.Trainer
	loader  *data.Loader
	inDT    rt.DType // the model's input dtype
	outDT   rt.DType
	tShape  []int // target sample shape as the model takes it
	res     *Result
	part    partial
	epoch   int // 0-based
	started time.Time
	steps0  int // steps at the start of this process
}

// Run trains cfg.Net on cfg.Train for cfg.Epochs epochs. On a
// cancelled ctx it stops between steps, writes a checkpoint (with
// CheckpointDir) and returns the result so far with an error wrapping
// ErrInterrupted. A NaN or infinite loss stops it with a *NaNError.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	r := &run{cfg: cfg, net: cfg.Net, res: &Result{}}
	if err := r.check(); err != nil {
		return nil, err
	}
	if err := r.setup(); err != nil {
		return nil, err
	}
	defer r.loader.Close()
	defer r.tr.Close()
	if err := r.loop(ctx); err != nil {
		return r.res, err
	}
	return r.res, nil
}

func (r *run) check() error {
	c := r.cfg
	switch {
	case c.Net == nil:
		return errors.New("train: Config.Net is nil")
	case c.Device == nil && len(c.Devices) == 0:
		return errors.New("train: Config.Device is nil")
	case len(c.Devices) > 0 && c.Device != nil && c.Device != c.Devices[0]:
		return errors.New("train: Config.Device is not Config.Devices[0]; set one of them")
	case c.Train == nil:
		return errors.New("train: no training set")
	case c.BatchSize <= 0:
		return fmt.Errorf("train: batch size %d", c.BatchSize)
	case c.Epochs <= 0:
		return fmt.Errorf("train: %d epochs", c.Epochs)
	case !(c.Optimizer.LR >= 0) && c.Schedule == nil:
		return fmt.Errorf("train: learning rate %g", c.Optimizer.LR)
	}
	if len(c.Devices) > 1 {
		if err := r.checkDP(); err != nil {
			return err
		}
	}
	m := r.net.Base
	r.inDT = m.Tensors[m.TensorIndex(r.net.Input)].DType
	r.outDT = r.net.OutDType
	if r.inDT == rt.Bool {
		return fmt.Errorf("train: the model's input %q has dtype %s; training feeds numbers", r.net.Input, r.inDT)
	}
	if b := r.net.Batch; b > 0 && c.BatchSize != b {
		return fmt.Errorf("train: the model takes batches of exactly %d samples (its input %q has a static batch dim); the batch size is %d", b, r.net.Input, c.BatchSize)
	}
	for _, d := range []struct {
		name string
		d    *data.Dataset
	}{{"training", c.Train}, {"validation", c.Val}} {
		if d.d == nil {
			continue
		}
		if _, err := data.NewDataset(d.d.X, d.d.Y, 0); err != nil {
			return fmt.Errorf("train: %s set: %w", d.name, err)
		}
		if d.d.Len() == 0 {
			return fmt.Errorf("train: the %s set is empty", d.name)
		}
		if !r.inDT.IsFloat() && (!d.d.X.DType.IsInt() || d.d.X.DType == rt.U8) {
			return fmt.Errorf("train: the model's input %q takes %s (indices); the %s set's x has dtype %s", r.net.Input, r.inDT, d.name, d.d.X.DType)
		}
		if r.net.Batch > 0 && d.d.Len() < r.net.Batch {
			return fmt.Errorf("train: the %s set has %d samples, fewer than the model's fixed batch of %d", d.name, d.d.Len(), r.net.Batch)
		}
		if err := finiteData(d.d.X, "x"); err != nil {
			return fmt.Errorf("train: %s set: %w", d.name, err)
		}
		if err := finiteData(d.d.Y, "y"); err != nil {
			return fmt.Errorf("train: %s set: %w", d.name, err)
		}
	}
	return nil
}

// finiteData checks that a float tensor holds no NaN or infinity.
func finiteData(t *rt.Tensor, name string) error {
	if !t.DType.IsFloat() {
		return nil
	}
	per := t.Len() / max(t.Shape[0], 1)
	for i := range t.Len() {
		if v := t.Float64(i); math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s of sample %d holds %g", name, i/max(per, 1), v)
		}
	}
	return nil
}

// checkTargets checks a dataset's targets against the loss and the
// model's output per sample, and returns the target sample shape the
// model takes.
func (r *run) checkTargets(d *data.Dataset, name string, out []int) ([]int, error) {
	y := d.Y
	ys := y.Shape[1:]
	loss := r.net.Loss
	if loss.Classes() {
		if !y.DType.IsInt() {
			return nil, fmt.Errorf("train: %s set: %s takes int64 class indices in y; y has dtype %s", name, loss, y.DType)
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("train: %s needs an output [N, C, ...]; the model's output has one value per sample", loss)
		}
		if !slices.Equal(ys, out[1:]) {
			return nil, fmt.Errorf("train: %s set: y has samples of shape %v; for the model's output [N %v] they must be %v", name, ys, out, out[1:])
		}
		dd := *d
		if err := dd.CheckLabels(out[0]); err != nil {
			return nil, fmt.Errorf("train: %s set: %w (the model has %d classes)", name, err, out[0])
		}
		return ys, nil
	}
	if !y.DType.IsFloat() && !y.DType.IsInt() {
		return nil, fmt.Errorf("train: %s set: y has dtype %s; %s takes numeric targets", name, y.DType, loss)
	}
	if rt.NumElements(ys) != rt.NumElements(out) {
		return nil, fmt.Errorf("train: %s set: y has samples of shape %v, the model's output %v: %s needs the same number of values", name, ys, out, loss)
	}
	if loss == BCE {
		for i := range y.Len() {
			if v := y.Float64(i); v < 0 || v > 1 {
				return nil, fmt.Errorf("train: %s set: target %g of sample %d is outside [0, 1], as bce needs", name, v, i/max(y.Len()/max(y.Shape[0], 1), 1))
			}
		}
	}
	return out, nil
}

func (r *run) setup() error {
	c := r.cfg
	sample := r.net.Sample
	for _, d := range []*data.Dataset{c.Train, c.Val} {
		if d != nil && !slices.Equal(d.X.Shape[1:], sample) {
			return fmt.Errorf("train: the dataset has samples of shape %v; the model takes %v", d.X.Shape[1:], sample)
		}
	}
	out := r.net.OutSample
	var err error
	if r.tShape, err = r.checkTargets(c.Train, "training", out); err != nil {
		return err
	}
	if c.Val != nil {
		if _, err := r.checkTargets(c.Val, "validation", out); err != nil {
			return err
		}
	}
	r.loader, err = data.NewLoader(c.Train, r.loaderOptions(true))
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	opts := r.net.TrainOptions()
	opt := c.Optimizer
	if c.Schedule != nil {
		opt.LR = c.Schedule.LR(0)
	}
	opts.Optimizer = &opt
	opts.Seed = c.Seed
	opts.Profile = c.Profile
	b := min(c.BatchSize, c.Train.Len())
	opts.Shapes = map[string][]int{r.net.Input: append([]int{b}, sample...), r.net.Target: append([]int{b}, r.tShape...)}
	opts.BucketBytes = c.BucketBytes
	opts.Collective = c.Collective
	opts.NoOverlap = c.NoOverlap
	if r.tr, err = engine.NewDataParallel(r.net.Model, r.devices(), opts); err != nil {
		r.loader.Close()
		return fmt.Errorf("train: %w", err)
	}
	if c.Resume != nil {
		if err := r.resume(c.Resume); err != nil {
			r.tr.Close()
			r.loader.Close()
			return err
		}
	}
	return nil
}

func (r *run) resume(ck *checkpoint.Checkpoint) error {
	if l := ck.Meta[metaLoss]; l != "" && l != string(r.net.Loss) {
		return fmt.Errorf("train: resume: the checkpoint trained with the %s loss, this run uses %s", l, r.net.Loss)
	}
	if err := ck.Restore(r.tr); err != nil {
		return fmt.Errorf("train: resume: %w", err)
	}
	if ck.Loader != nil {
		if err := r.loader.SetState(*ck.Loader); err != nil {
			return fmt.Errorf("train: resume: %w", err)
		}
	}
	r.epoch = ck.Epoch
	for key, dst := range map[string]any{metaHistory: &r.res.Epochs, metaLosses: &r.res.Losses, metaPartial: &r.part} {
		if s, ok := ck.Meta[key]; ok {
			if err := json.Unmarshal([]byte(s), dst); err != nil {
				return fmt.Errorf("train: resume: checkpoint metadata %s: %w", key, err)
			}
		}
	}
	for i := range r.res.Epochs {
		r.res.Epochs[i].Time = time.Duration(r.res.Epochs[i].Seconds * float64(time.Second))
		fixNaN(&r.res.Epochs[i])
	}
	return nil
}

// fixNaN turns accuracies stored as -1 (JSON has no NaN) back into NaN.
func fixNaN(e *EpochStats) {
	for _, m := range []*Metrics{&e.Train, &e.Val} {
		if m.Accuracy < 0 {
			m.Accuracy = math.NaN()
		}
	}
}

// jsonSafe returns e with NaN accuracies as -1.
func jsonSafe(e EpochStats) EpochStats {
	for _, m := range []*Metrics{&e.Train, &e.Val} {
		if math.IsNaN(m.Accuracy) {
			m.Accuracy = -1
		}
	}
	return e
}

// loaderOptions returns the loader options of the training set (with
// shuffling and augmentation) or of an evaluation.
func (r *run) loaderOptions(training bool) data.LoaderOptions {
	c := r.cfg
	o := data.LoaderOptions{BatchSize: c.BatchSize, Mean: c.Mean, Std: c.Std, DropLast: r.net.Batch > 0}
	if !r.inDT.IsFloat() {
		o.Mean, o.Std = nil, nil // indices: fed as they are
	}
	if training {
		o.Shuffle, o.Seed, o.CropPadding, o.HFlip, o.Prefetch = c.Shuffle, c.Seed, c.CropPadding, c.HFlip, 2
	}
	return o
}

// feed converts a batch to the model's input and target dtypes and
// shapes.
func (r *run) feed(b *data.Batch) map[string]*rt.Tensor {
	x, y := b.X, b.Y
	if x.DType != r.inDT {
		// f64 models, and index inputs (which the loader gives as f32,
		// exact below 2^24).
		x = rt.FromFloat64(r.inDT, x.Float64s(), x.Shape...)
	}
	n := y.Shape[0]
	if !r.net.Loss.Classes() {
		if y.DType != r.outDT {
			y = rt.FromFloat64(r.outDT, y.Float64s(), y.Shape...)
		}
		if !slices.Equal(y.Shape[1:], r.tShape) {
			y = &rt.Tensor{DType: y.DType, Shape: append([]int{n}, r.tShape...), Data: y.Data}
		}
	}
	return map[string]*rt.Tensor{r.net.Input: x, r.net.Target: y}
}

// correct counts the right predictions of a batch: the argmax over dim 1
// for class losses, the rounded probability for bce.
func correct(loss Loss, out, y *rt.Tensor) (hits, total int) {
	switch {
	case loss.Classes():
		if len(out.Shape) < 2 {
			return 0, 0
		}
		n, c := out.Shape[0], out.Shape[1]
		inner := out.Len() / max(n*c, 1)
		v := out.Float64s()
		for i := range n {
			for k := range inner {
				best, arg := math.Inf(-1), 0
				for j := range c {
					if x := v[(i*c+j)*inner+k]; x > best {
						best, arg = x, j
					}
				}
				if int(y.Float64(i*inner+k)) == arg {
					hits++
				}
				total++
			}
		}
	case loss == BCE:
		for i := range out.Len() {
			p := 0.0
			if out.Float64(i) >= 0.5 {
				p = 1
			}
			if p == math.Round(y.Float64(i)) {
				hits++
			}
			total++
		}
	}
	return hits, total
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func (r *run) loop(ctx context.Context) error {
	c := r.cfg
	nb := r.loader.BatchesPerEpoch()
	total := c.Epochs * nb
	r.started = time.Now()
	r.steps0 = r.tr.Steps()
	if c.Log != nil && r.steps0 == 0 {
		if _, err := io.WriteString(c.Log, "step,epoch,loss,lr\n"); err != nil {
			return fmt.Errorf("train: log: %w", err)
		}
	}
	acc := r.net.Loss.Classes() || r.net.Loss == BCE
	for ; r.epoch < c.Epochs; r.epoch++ {
		epochStart := time.Now()
		base := r.part.Seconds
		for {
			if ctx.Err() != nil {
				r.part.Seconds = base + time.Since(epochStart).Seconds()
				return r.interrupt()
			}
			b, err := r.loader.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("train: %w", err)
			}
			if c.Schedule != nil {
				r.tr.SetLR(c.Schedule.LR(r.tr.Steps()))
			}
			lr := r.tr.LR()
			in := r.feed(b)
			var snap *checkpoint.Checkpoint
			if c.DetectNaN {
				if snap, err = checkpoint.Capture(r.tr); err != nil {
					return fmt.Errorf("train: %w", err)
				}
			}
			res, err := r.tr.Step(context.Background(), in)
			if err != nil {
				return fmt.Errorf("train: step %d: %w", r.tr.Steps()+1, err)
			}
			step := r.tr.Steps()
			if c.Profile {
				r.res.Profile = r.tr.Profile() // of the last training step, not of a validation
			}
			bad := !finite(res.Loss)
			if !bad && c.DetectNaN {
				if bad, err = r.weightsBad(); err != nil {
					return err
				}
			}
			if bad {
				e := &NaNError{Step: step, Epoch: r.epoch + 1, Batch: b.Index + 1, Loss: res.Loss}
				if c.DetectNaN {
					e.Op = r.locateNaN(snap, in)
				}
				return e
			}
			n := b.X.Shape[0]
			r.part.Loss += res.Loss * float64(n)
			r.part.Samples += n
			if acc {
				h, t := correct(r.net.Loss, res.Outputs[r.net.Output], in[r.net.Target])
				r.part.Hits += h
				r.part.Total += t
			}
			r.res.Losses = append(r.res.Losses, res.Loss)
			if c.Log != nil {
				if _, err := fmt.Fprintf(c.Log, "%d,%d,%s,%s\n", step, r.epoch+1, fmtFloat(res.Loss), fmtFloat(lr)); err != nil {
					return fmt.Errorf("train: log: %w", err)
				}
			}
			if c.Progress != nil {
				el := time.Since(r.started)
				done := step - r.steps0
				p := Progress{Epoch: r.epoch + 1, Epochs: c.Epochs, Batch: b.Index + 1, Batches: nb, Step: step, Steps: total,
					Loss: res.Loss, LR: lr, Elapsed: el}
				if s := time.Since(epochStart).Seconds(); s > 0 {
					p.SamplesPerSec = float64(r.part.Samples) / (base + s)
				}
				if done > 0 {
					p.ETA = time.Duration(float64(el) / float64(done) * float64(max(total-step, 0)))
				}
				c.Progress(p)
			}
			if c.CheckpointEvery > 0 && step%c.CheckpointEvery == 0 && c.CheckpointDir != "" {
				r.part.Seconds = base + time.Since(epochStart).Seconds()
				if _, err := r.save(); err != nil {
					return err
				}
			}
		}
		r.part.Seconds = base + time.Since(epochStart).Seconds()
		es := EpochStats{Epoch: r.epoch + 1, Train: r.part.metrics(acc), Seconds: r.part.Seconds,
			Time: time.Duration(r.part.Seconds * float64(time.Second)), Val: Metrics{Accuracy: math.NaN()}}
		if c.Val != nil {
			m, err := r.evaluate(context.Background(), c.Val)
			if err != nil {
				return err
			}
			es.Val = m
		}
		r.res.Epochs = append(r.res.Epochs, es)
		r.part = partial{}
		if c.Progress != nil {
			c.Progress(Progress{Epoch: r.epoch + 1, Epochs: c.Epochs, Batch: nb, Batches: nb, Step: r.tr.Steps(), Steps: total,
				Elapsed: time.Since(r.started), EpochDone: &es, LR: r.tr.LR()})
		}
		if c.CheckpointDir != "" && c.EpochCheckpoints {
			r.epoch++
			_, err := r.save()
			r.epoch--
			if err != nil {
				return err
			}
		}
	}
	return r.finish()
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// weightsBad reports whether a weight is NaN or infinite.
func (r *run) weightsBad() (bool, error) {
	w, err := r.tr.Weights()
	if err != nil {
		return false, fmt.Errorf("train: %w", err)
	}
	for _, t := range w {
		if !allFinite(t) {
			return true, nil
		}
	}
	return false, nil
}

func allFinite(t *rt.Tensor) bool {
	if !t.DType.IsFloat() {
		return true
	}
	for i := range t.Len() {
		if !finite(t.Float64(i)) {
			return false
		}
	}
	return true
}

// evaluate computes the loss and accuracy of the current weights on d,
// in inference mode, in batches.
func (r *run) evaluate(ctx context.Context, d *data.Dataset) (Metrics, error) {
	l, err := data.NewLoader(d, r.loaderOptions(false))
	if err != nil {
		return Metrics{}, fmt.Errorf("train: validation: %w", err)
	}
	defer l.Close()
	var p partial
	for {
		b, err := l.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Metrics{}, fmt.Errorf("train: validation: %w", err)
		}
		in := r.feed(b)
		out, err := r.tr.Eval(ctx, in)
		if err != nil {
			return Metrics{}, fmt.Errorf("train: validation: %w", err)
		}
		n := b.X.Shape[0]
		p.Loss += out[r.net.LossName].Float64(0) * float64(n)
		p.Samples += n
		h, t := correct(r.net.Loss, out[r.net.Output], in[r.net.Target])
		p.Hits += h
		p.Total += t
	}
	return p.metrics(r.net.Loss.Classes() || r.net.Loss == BCE), nil
}

// Evaluate computes the loss and accuracy of weights (a Trainer's or a
// Result's) on d, on dev: the inference model with the loss, in batches.
// Mean and Std normalise the inputs as in training.
func Evaluate(ctx context.Context, n *Net, dev rt.Device, weights map[string]*rt.Tensor, d *data.Dataset, batch int, mean, std []float64) (Metrics, error) {
	r := &run{cfg: Config{Net: n, Device: dev, Train: d, BatchSize: batch, Epochs: 1, Mean: mean, Std: std}, net: n}
	if err := r.check(); err != nil {
		return Metrics{}, err
	}
	if !slices.Equal(d.X.Shape[1:], n.Sample) {
		return Metrics{}, fmt.Errorf("train: the dataset has samples of shape %v; the model takes %v", d.X.Shape[1:], n.Sample)
	}
	var err error
	if r.tShape, err = r.checkTargets(d, "evaluation", n.OutSample); err != nil {
		return Metrics{}, err
	}
	opts := n.TrainOptions()
	b := min(batch, d.Len())
	opts.Shapes = map[string][]int{n.Input: append([]int{b}, d.X.Shape[1:]...), n.Target: append([]int{b}, r.tShape...)}
	if r.tr, err = engine.NewTrainer(n.Model, dev, opts); err != nil {
		return Metrics{}, fmt.Errorf("train: %w", err)
	}
	defer r.tr.Close()
	if weights != nil {
		if err := r.tr.SetWeights(weights); err != nil {
			return Metrics{}, fmt.Errorf("train: %w", err)
		}
	}
	return r.evaluate(ctx, d)
}

func (r *run) finish() error {
	c := r.cfg
	w, err := r.tr.Weights()
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	r.res.Weights = w
	r.res.Steps = r.tr.Steps()
	r.res.Info = r.tr.Info()
	if n := len(r.res.Epochs); n > 0 && r.res.Epochs[n-1].Val.Samples > 0 {
		r.res.Final = r.res.Epochs[n-1].Val
	} else {
		// No validation set: the training set, after the last update.
		if r.res.Final, err = r.evaluate(context.Background(), c.Train); err != nil {
			return err
		}
	}
	return nil
}

// interrupt writes a checkpoint and reports the interruption.
func (r *run) interrupt() error {
	r.res.Interrupted = true
	r.res.Steps = r.tr.Steps()
	if r.cfg.CheckpointDir == "" {
		return fmt.Errorf("train: %w at step %d (no checkpoint folder set)", ErrInterrupted, r.tr.Steps())
	}
	path, err := r.save()
	if err != nil {
		return fmt.Errorf("train: %w at step %d; writing the checkpoint failed: %w", ErrInterrupted, r.tr.Steps(), err)
	}
	r.res.Checkpoint = path
	return fmt.Errorf("train: %w at step %d (epoch %d); checkpoint %s", ErrInterrupted, r.tr.Steps(), r.epoch+1, path)
}

// save writes the run's state to CheckpointDir/last.ckpt.
func (r *run) save() (string, error) {
	ck, err := checkpoint.Capture(r.tr)
	if err != nil {
		return "", fmt.Errorf("train: %w", err)
	}
	ck.Epoch = r.epoch
	ls := r.loader.State()
	ck.Loader = &ls
	ck.Meta = map[string]string{}
	for k, v := range r.cfg.Meta {
		ck.Meta[k] = v
	}
	hist := make([]EpochStats, len(r.res.Epochs))
	for i, e := range r.res.Epochs {
		hist[i] = jsonSafe(e)
	}
	for key, v := range map[string]any{metaHistory: hist, metaLosses: r.res.Losses, metaPartial: r.part} {
		b, err := json.Marshal(v)
		if err != nil {
			return "", fmt.Errorf("train: checkpoint: %w", err)
		}
		ck.Meta[key] = string(b)
	}
	ck.Meta[metaLoss] = string(r.net.Loss)
	if r.cfg.Schedule != nil {
		ck.Scheduler = json.RawMessage(fmt.Sprintf(`{"step":%d}`, r.tr.Steps()))
	}
	if err := os.MkdirAll(r.cfg.CheckpointDir, 0o755); err != nil {
		return "", fmt.Errorf("train: checkpoint: %w", err)
	}
	path := filepath.Join(r.cfg.CheckpointDir, CheckpointFile)
	if err := checkpoint.Write(path, ck); err != nil {
		return "", err
	}
	return path, nil
}

// ReadCheckpoint reads the checkpoint of a run: path is a checkpoint
// file or a folder holding last.ckpt.
func ReadCheckpoint(path string) (*checkpoint.Checkpoint, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, CheckpointFile)
	}
	return checkpoint.Read(path)
}

// devices is the device list of a run: Devices, or Device alone.
func (r *run) devices() []rt.Device {
	if len(r.cfg.Devices) > 0 {
		return r.cfg.Devices
	}
	return []rt.Device{r.cfg.Device}
}

// checkDP checks a data-parallel run: every batch, the last of each
// epoch included, must give each device at least one sample, and the
// devices must agree on the model's dtypes.
func (r *run) checkDP() error {
	c := r.cfg
	n := len(c.Devices)
	if c.BatchSize < n {
		return fmt.Errorf("train: a batch of %d samples cannot be split over %d devices; the batch size must be at least the device count", c.BatchSize, n)
	}
	if c.Train != nil && r.net.Batch == 0 {
		if last := c.Train.Len() % c.BatchSize; last > 0 && last < n && c.Train.Len() > c.BatchSize {
			return fmt.Errorf("train: the last batch of each epoch has %d samples (%d samples in batches of %d), fewer than the %d devices; choose a batch size that leaves at least %d", last, c.Train.Len(), c.BatchSize, n, n)
		}
		if c.Train.Len() < n {
			return fmt.Errorf("train: the training set has %d samples, fewer than the %d devices", c.Train.Len(), n)
		}
	}
	infos := make([]rt.DeviceInfo, n)
	for k, d := range c.Devices {
		if d == nil {
			return fmt.Errorf("train: Config.Devices[%d] is nil", k)
		}
		infos[k] = d.Info()
	}
	var need []rt.DType
	for _, t := range r.net.Model.Tensors {
		if t.DType.IsFloat() && !slices.Contains(need, t.DType) {
			need = append(need, t.DType)
		}
	}
	if err := rt.CheckDTypes(infos, need); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	return nil
}
