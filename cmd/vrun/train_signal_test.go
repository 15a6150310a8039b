//go:build unix

package main

import (
	"bytes"
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

	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(append([]string{"train"}, append(base, "-log", part+"/log.csv", "-o", part+"/m.bin")...), &stdout, &stderr)
	}()
	// Wait for training to start (a progress line), then interrupt.
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(stderr.String(), "epoch 1/3  step") {
		if time.Now().After(deadline) {
			t.Fatalf("training did not start:\n%s", stderr.String())
		}
		time.Sleep(time.Millisecond)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
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
