package rt

import (
	"errors"
	"strings"
	"testing"
)

// sizedBuf is a stand-in for a backend's buffer in the frame tests.
type sizedBuf struct {
	size int64
	own  bool // belongs to the test backend
}

func (b *sizedBuf) Size() int64 { return b.size }
func (b *sizedBuf) Free()       {}

func TestCountMemory(t *testing.T) {
	bufs := map[*sizedBuf]struct{}{{size: 3}: {}, {size: 5}: {}, {size: 0}: {}}
	hosts := map[*sizedBuf]struct{}{{size: 7}: {}}
	got := CountMemory(bufs, hosts)
	want := MemoryUsage{Buffers: 3, Bytes: 8, HostBuffers: 1, HostBytes: 7}
	if got != want {
		t.Errorf("CountMemory = %+v, want %+v", got, want)
	}
	if got := CountMemory(map[*sizedBuf]struct{}(nil), map[*sizedBuf]struct{}(nil)); got != (MemoryUsage{}) {
		t.Errorf("CountMemory of nothing = %+v", got)
	}
}

func TestCopyBuffers(t *testing.T) {
	errClosed := errors.New("device closed")
	own := func(b Buffer) (*sizedBuf, error) {
		s, ok := b.(*sizedBuf)
		if !ok || !s.own {
			return nil, errors.New("not ours")
		}
		return s, nil
	}
	a, b, other := &sizedBuf{size: 16, own: true}, &sizedBuf{size: 8, own: true}, &sizedBuf{size: 16}
	for _, c := range []struct {
		name              string
		closed            bool
		dst, src          Buffer
		dstOff, srcOff, n int64
		wantCopy          bool
		wantErr           string // substring; "" for success
	}{
		{name: "ok", dst: a, src: b, dstOff: 8, srcOff: 0, n: 8, wantCopy: true},
		{name: "zero bytes", dst: a, src: b, n: 0},
		{name: "closed", closed: true, dst: a, src: b, n: 1, wantErr: "test: Copy: device closed"},
		{name: "foreign source", dst: a, src: other, n: 1, wantErr: "test: Copy: not ours"},
		{name: "foreign destination", dst: other, src: a, n: 1, wantErr: "test: Copy: not ours"},
		{name: "source range", dst: a, src: b, srcOff: 4, n: 5, wantErr: "test: Copy: source: range"},
		{name: "destination range", dst: b, src: a, dstOff: 1, n: 8, wantErr: "test: Copy: destination: range"},
		{name: "negative size", dst: a, src: b, n: -1, wantErr: "test: Copy: bad size -1"},
	} {
		check := func() error {
			if c.closed {
				return errClosed
			}
			return nil
		}
		copied := false
		err := CopyBuffers("test", check, own, c.dst, c.dstOff, c.src, c.srcOff, c.n, func(d, s *sizedBuf) error {
			if d != c.dst || s != c.src {
				t.Errorf("%s: copy got the buffers swapped", c.name)
			}
			copied = true
			return nil
		})
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: error %v, want %q", c.name, err, c.wantErr)
		}
		if copied != c.wantCopy {
			t.Errorf("%s: copy called %v, want %v", c.name, copied, c.wantCopy)
		}
	}
	if err := CopyBuffers("test", func() error { return nil }, own, a, 0, b, 0, 1, func(d, s *sizedBuf) error { return errClosed }); err != errClosed {
		t.Errorf("copy's error came back as %v, want it unwrapped", err)
	}
}
