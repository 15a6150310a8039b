package checkpoint

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/vrun-go/vrun/internal/atomicfile"

	"github.com/vrun-go/vrun/data"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/rt"
)

// Magic starts every checkpoint file.
const Magic = "VRUNCKPT"

// Version is the format version this package writes and reads.
const Version = 1

// MaxHeader is the largest JSON header Decode accepts, in bytes.
const MaxHeader = 64 << 20

// Errors that callers may test for with errors.Is.
var (
	// ErrCorrupt: the file is damaged or truncated (checksum, sizes or
	// structure do not hold), or is not a checkpoint at all.
	ErrCorrupt = errors.New("corrupt checkpoint")
	// ErrVersion: a checkpoint of a format version this build does not
	// read.
	ErrVersion = errors.New("unsupported checkpoint version")
)

// Checkpoint is the resumable state of a training run.
type Checkpoint struct {
	// Weights are the trained parameters and BatchNorm running
	// statistics, by name (engine.Trainer.Weights).
	Weights map[string]*rt.Tensor
	// Train is the trainer's step count, learning rate, optimizer state
	// and Dropout generator state (engine.Trainer.State).
	Train *engine.TrainState
	// Epoch is the caller's epoch counter.
	Epoch int
	// Loader, if set, is the data loader's position.
	Loader *data.LoaderState
	// Scheduler, if set, is the learning-rate scheduler's state: any JSON
	// value, stored as given.
	Scheduler json.RawMessage
	// Meta holds free-form strings (model, command line, ...).
	Meta map[string]string
}

// Capture reads the weights and the training state of t.
func Capture(t *engine.Trainer) (*Checkpoint, error) {
	w, err := t.Weights()
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	st, err := t.State()
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return &Checkpoint{Weights: w, Train: st}, nil
}

// Restore writes the checkpoint's weights and training state into t,
// which must train the same model with the same parameters and
// optimizer kind. The epoch, loader position and scheduler state are the
// caller's to restore.
func (c *Checkpoint) Restore(t *engine.Trainer) error {
	if c.Train == nil {
		return errors.New("checkpoint: no training state to restore")
	}
	if err := t.SetWeights(c.Weights); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := t.SetState(c.Train); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// header is the JSON header of the file format (docs/checkpoint.md).
type header struct {
	Epoch     int               `json:"epoch"`
	Steps     int               `json:"steps"`
	LR        float64           `json:"lr"`
	Params    []string          `json:"params"`
	RNG       string            `json:"rng"`
	Loader    *data.LoaderState `json:"loader,omitempty"`
	Scheduler json.RawMessage   `json:"scheduler,omitempty"`
	Meta      map[string]string `json:"meta,omitempty"`
	Tensors   []entry           `json:"tensors"`
}

// entry places one tensor in the data section.
type entry struct {
	Group  string `json:"group"` // "weight" or "optim"
	Name   string `json:"name"`
	DType  string `json:"dtype"`
	Shape  []int  `json:"shape"`
	Offset int64  `json:"offset"` // from the start of the data section
	Size   int64  `json:"size"`   // bytes
}

const (
	groupWeight = "weight"
	groupOptim  = "optim"
	preamble    = len(Magic) + 8 // magic, version, header length
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Encode writes c in the checkpoint format.
func Encode(w io.Writer, c *Checkpoint) error {
	b, err := encode(c)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

func encode(c *Checkpoint) ([]byte, error) {
	if c.Train == nil {
		return nil, errors.New("checkpoint: Train state missing")
	}
	if math.IsNaN(c.Train.LR) || math.IsInf(c.Train.LR, 0) {
		return nil, fmt.Errorf("checkpoint: learning rate %g", c.Train.LR)
	}
	if len(c.Scheduler) > 0 && !json.Valid(c.Scheduler) {
		return nil, errors.New("checkpoint: scheduler state is not valid JSON")
	}
	h := header{Epoch: c.Epoch, Steps: c.Train.Steps, LR: c.Train.LR, Params: c.Train.Params,
		RNG: base64.StdEncoding.EncodeToString(c.Train.RNG), Loader: c.Loader, Meta: c.Meta}
	if len(c.Scheduler) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, c.Scheduler); err != nil {
			return nil, fmt.Errorf("checkpoint: scheduler state: %w", err)
		}
		h.Scheduler = buf.Bytes()
	}
	if h.Params == nil {
		h.Params = []string{}
	}
	var blobs [][]byte
	var off int64
	for _, g := range []struct {
		name string
		m    map[string]*rt.Tensor
	}{{groupWeight, c.Weights}, {groupOptim, c.Train.Optim}} {
		names := make([]string, 0, len(g.m))
		for n := range g.m {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			t := g.m[n]
			if t == nil {
				return nil, fmt.Errorf("checkpoint: %s %q is nil", g.name, n)
			}
			if err := t.Check(); err != nil {
				return nil, fmt.Errorf("checkpoint: %s %q: %w", g.name, n, err)
			}
			h.Tensors = append(h.Tensors, entry{Group: g.name, Name: n, DType: t.DType.String(), Shape: t.Shape, Offset: off, Size: int64(len(t.Data))})
			blobs = append(blobs, t.Data)
			off += int64(len(t.Data))
		}
	}
	if h.Tensors == nil {
		h.Tensors = []entry{}
	}
	js, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	out := make([]byte, 0, preamble+len(js)+int(off)+4)
	out = append(out, Magic...)
	out = binary.LittleEndian.AppendUint32(out, Version)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(js)))
	out = append(out, js...)
	for _, b := range blobs {
		out = append(out, b...)
	}
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, castagnoli)), nil
}

// corrupt makes an ErrCorrupt error.
func corrupt(format string, args ...any) error {
	return fmt.Errorf("checkpoint: %w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// Decode parses a checkpoint, validating its checksum, header and
// tensor table.
func Decode(b []byte) (*Checkpoint, error) {
	if len(b) < len(Magic) || string(b[:len(Magic)]) != Magic {
		return nil, corrupt("not a vrun checkpoint (no %q magic)", Magic)
	}
	if len(b) < preamble {
		return nil, corrupt("truncated: %d bytes, shorter than the %d-byte preamble", len(b), preamble)
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != Version {
		return nil, fmt.Errorf("checkpoint: %w: version %d (this build reads version %d)", ErrVersion, v, Version)
	}
	if len(b) < preamble+4 {
		return nil, corrupt("truncated: %d bytes", len(b))
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return nil, corrupt("checksum mismatch (stored %08x, computed %08x): the file is damaged or truncated", sum, got)
	}
	hl := int64(binary.LittleEndian.Uint32(b[12:]))
	if hl > MaxHeader || int64(preamble)+hl > int64(len(body)) {
		return nil, corrupt("header length %d exceeds the file", hl)
	}
	var h header
	dec := json.NewDecoder(bytes.NewReader(body[preamble : preamble+int(hl)]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return nil, corrupt("header: %v", err)
	}
	if dec.More() {
		return nil, corrupt("header: data after the JSON object")
	}
	dataSec := body[preamble+int(hl):]
	rng, err := base64.StdEncoding.DecodeString(h.RNG)
	if err != nil {
		return nil, corrupt("rng: %v", err)
	}
	if len(rng) == 0 {
		rng = nil
	}
	// Normal forms, as Encode writes them.
	if h.Params == nil {
		h.Params = []string{}
	}
	if len(h.Meta) == 0 {
		h.Meta = nil
	}
	if len(h.Scheduler) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, h.Scheduler); err != nil {
			return nil, corrupt("scheduler: %v", err)
		}
		h.Scheduler = buf.Bytes()
	}
	if h.Steps < 0 || h.Epoch < 0 || math.IsNaN(h.LR) {
		return nil, corrupt("steps %d, epoch %d", h.Steps, h.Epoch)
	}
	c := &Checkpoint{
		Weights:   map[string]*rt.Tensor{},
		Train:     &engine.TrainState{Steps: h.Steps, LR: h.LR, Params: h.Params, Optim: map[string]*rt.Tensor{}, RNG: rng},
		Epoch:     h.Epoch,
		Loader:    h.Loader,
		Scheduler: h.Scheduler,
		Meta:      h.Meta,
	}
	var end int64
	for i, e := range h.Tensors {
		var dst map[string]*rt.Tensor
		switch e.Group {
		case groupWeight:
			dst = c.Weights
		case groupOptim:
			dst = c.Train.Optim
		default:
			return nil, corrupt("tensor %d %q: group %q", i, e.Name, e.Group)
		}
		if _, dup := dst[e.Name]; dup {
			return nil, corrupt("tensor %d: %s %q appears twice", i, e.Group, e.Name)
		}
		dt, err := rt.ParseDType(e.DType)
		if err != nil {
			return nil, corrupt("tensor %d %q: %v", i, e.Name, err)
		}
		n := rt.NumElements(e.Shape)
		if n < 0 || n > math.MaxInt64/int64(dt.Size()) || n*int64(dt.Size()) != e.Size {
			return nil, corrupt("tensor %d %q: %d bytes for %s%v", i, e.Name, e.Size, dt, e.Shape)
		}
		if e.Offset != end || e.Size > int64(len(dataSec))-end {
			return nil, corrupt("tensor %d %q: bytes [%d, %d+%d) are not next in the %d-byte data section", i, e.Name, e.Offset, e.Offset, e.Size, len(dataSec))
		}
		dst[e.Name] = &rt.Tensor{DType: dt, Shape: slices.Clone(e.Shape), Data: slices.Clone(dataSec[end : end+e.Size])}
		end += e.Size
	}
	if end != int64(len(dataSec)) {
		return nil, corrupt("%d bytes after the last tensor", int64(len(dataSec))-end)
	}
	return c, nil
}

// Read reads and validates the checkpoint file at path.
func Read(path string) (*Checkpoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	c, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Write stores c at path atomically: it writes a temporary file in the
// same folder, syncs it, and renames it over path (replacing an older
// checkpoint, on Windows too), then syncs the folder. A failure leaves
// the old file, if any, as it was and no temporary file behind.
func Write(path string, c *Checkpoint) (err error) {
	b, err := encode(c)
	if err != nil {
		return err
	}
	return writeAtomic(path, b)
}

// writeAtomic writes b to path through a synced temporary file and a
// rename, then syncs the folder.
func writeAtomic(path string, b []byte) error {
	if err := atomicfile.WriteBytes(path, b); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	dir := filepath.Dir(path)
	syncDir(dir)
	return nil
}
