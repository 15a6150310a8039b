//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vrun-go/vrun/train"
)

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// pausingWriter is a syncBuffer that calls pause, once, from the first
// write containing at, before that write returns.
type pausingWriter struct {
	syncBuffer
	at    string
	pause func()
	once  sync.Once
}

func (w *pausingWriter) Write(p []byte) (int, error) {
	n, err := w.syncBuffer.Write(p)
	if strings.Contains(string(p), w.at) {
		w.once.Do(w.pause)
	}
	return n, err
}

// Ctrl-C (SIGINT) in the middle of an epoch writes a checkpoint and the
// log so far, and stops cleanly (exit status 130, no model written);
// resuming from it gives the log and the model of a run that was never
// interrupted, byte for byte.
func TestTrainInterrupt(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	base := append(f.xy("y.npy"), "mlp", "-batch", "8", "-lr", "0.01", "-device", "cpu", "-epochs", "3")
	full, part := filepath.Join(dir, "full"), filepath.Join(dir, "part")
	os.Mkdir(full, 0o755)
	os.Mkdir(part, 0o755)
	mustTrain(t, append(base, "-log", full+"/log.csv", "-o", full+"/m.bin")...)

	// The progress writer stops training at its first line of epoch 1,
	// sends SIGINT and holds the step until the signal has cancelled the
	// run's context, so the interruption lands mid-epoch however fast
	// the machine is.
	started := make(chan context.Context, 1)
	orig := interruptContext
	interruptContext = func() (context.Context, context.CancelFunc) {
		ctx, stop := orig()
		started <- ctx
		return ctx, stop
	}
	defer func() { interruptContext = orig }()
	var stdout syncBuffer
	stderr := &pausingWriter{at: "epoch 1/3  step", pause: func() {
		ctx := <-started
		if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
			t.Error(err)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(60 * time.Second):
			t.Error("SIGINT did not cancel the run")
		}
	}}
	done := make(chan error, 1)
	go func() {
		done <- run(append([]string{"train"}, append(base, "-log", part+"/log.csv", "-o", part+"/m.bin")...), &stdout, stderr)
	}()
	err := <-done
	var ie interrupted
	if !errors.As(err, &ie) || !errors.Is(err, train.ErrInterrupted) {
		t.Fatalf("got %v, want an interruption\n%s%s", err, stdout.String(), stderr.String())
	}
	ck := filepath.Join(part, "m.ckpt")
	if !strings.Contains(err.Error(), "-resume "+ck) {
		t.Errorf("the error does not say how to resume: %v", err)
	}
	if _, err := os.Stat(filepath.Join(part, "m.bin")); !os.IsNotExist(err) {
		t.Errorf("an interrupted run wrote the model: %v", err)
	}
	loss, _, _, _ := readLog(t, filepath.Join(part, "log.csv"))
	if len(loss) == 0 || len(loss) >= 3*27 {
		t.Fatalf("the interrupted log has %d steps", len(loss))
	}
	t.Logf("interrupted after step %d", len(loss))
	o := mustTrain(t, append(base, "-log", part+"/log.csv", "-o", part+"/m.bin", "-resume", ck)...)
	contains(t, o, "resume   "+ck)
	sameFiles(t, full, part, "log.csv", "m.bin", "m.png")
}
