package nccl_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vrun-go/vrun/dist/nccl"
	"github.com/vrun-go/vrun/rt"
)

func testID() nccl.UniqueID {
	var id nccl.UniqueID
	for i := range id {
		id[i] = byte(i*7 + 3)
	}
	return id
}

// TestBootstrap serves an id to several ranks, one of which starts
// before rank 0 listens, and checks that each gets it.
func TestBootstrap(t *testing.T) {
	for _, nranks := range []int{1, 2, 5} {
		t.Run(fmt.Sprint(nranks), func(t *testing.T) {
			// Reserve a port, free it, and let ranks dial it before rank 0
			// listens again (they retry).
			ln0, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Skipf("no loopback TCP: %v", err)
			}
			addr := ln0.Addr().String()
			ln0.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ids := make([]nccl.UniqueID, nranks)
			errs := make([]error, nranks)
			var wg sync.WaitGroup
			for r := 1; r < nranks; r++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ids[r], errs[r] = nccl.FetchID(ctx, addr, r, nranks)
				}()
			}
			time.Sleep(150 * time.Millisecond)
			want := testID()
			ids[0], errs[0] = nccl.Bootstrap(ctx, nccl.Launch{Rank: 0, NRanks: nranks, Root: addr}, func() (nccl.UniqueID, error) { return want, nil })
			wg.Wait()
			for r := range nranks {
				if errs[r] != nil {
					t.Fatalf("rank %d: %v", r, errs[r])
				}
				if ids[r] != want {
					t.Fatalf("rank %d got another id", r)
				}
			}
		})
	}
}

// TestBootstrapRefusals: a wrong rank count, a rank out of range and a
// rank given twice are refused with a message; garbage and stalled
// connections delay no one; rank 0 gives up naming the missing ranks.
func TestBootstrapRefusals(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback TCP: %v", err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- nccl.ServeID(ctx, ln, testID(), 4) }()

	// A stalled connection and a garbage one.
	stalled, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	if g, err := net.Dial("tcp", addr); err == nil {
		g.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
		g.Close()
	}
	short, scancel := context.WithTimeout(ctx, time.Second)
	defer scancel()
	for _, tc := range []struct {
		rank, nranks int
		want         string
	}{
		{1, 3, "expects 3 ranks, rank 0 runs 4"},
		{4, 4, "out of range"},
		{0, 4, "out of range"},
		{2, 4, ""},
		{2, 4, "already joined"},
	} {
		id, err := nccl.FetchID(short, addr, tc.rank, tc.nranks)
		if tc.want == "" {
			if err != nil || id != testID() {
				t.Fatalf("rank %d: %v", tc.rank, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("rank %d of %d: error %v, want %q", tc.rank, tc.nranks, err, tc.want)
		}
	}
	err = <-done
	if err == nil || !strings.Contains(err.Error(), "ranks [1 3] did not fetch") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ServeID: %v, want the missing ranks 1 and 3", err)
	}
	// Nobody listens any more: a fetch fails when its context ends.
	c2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	if _, err := nccl.FetchID(c2, addr, 1, 4); err == nil || !strings.Contains(err.Error(), "could not fetch") {
		t.Errorf("FetchID with no rank 0: %v", err)
	}
}

// TestLaunchFromEnv checks the launch variables.
func TestLaunchFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want nccl.Launch
		err  string
	}{
		{map[string]string{"VRUN_NCCL_RANK": "1", "VRUN_NCCL_NRANKS": "2", "VRUN_NCCL_ROOT": "10.0.0.1:29500"}, nccl.Launch{1, 2, "10.0.0.1:29500"}, ""},
		{map[string]string{"VRUN_NCCL_RANK": "0", "VRUN_NCCL_NRANKS": "1"}, nccl.Launch{0, 1, ""}, ""},
		{map[string]string{"VRUN_NCCL_NRANKS": "2"}, nccl.Launch{}, "VRUN_NCCL_RANK is not set"},
		{map[string]string{"VRUN_NCCL_RANK": "x", "VRUN_NCCL_NRANKS": "2"}, nccl.Launch{}, "not a number"},
		{map[string]string{"VRUN_NCCL_RANK": "2", "VRUN_NCCL_NRANKS": "2", "VRUN_NCCL_ROOT": "h:1"}, nccl.Launch{}, "rank 2 of 2"},
		{map[string]string{"VRUN_NCCL_RANK": "1", "VRUN_NCCL_NRANKS": "2"}, nccl.Launch{}, "VRUN_NCCL_ROOT is not set"},
		{map[string]string{"VRUN_NCCL_RANK": "1", "VRUN_NCCL_NRANKS": "2", "VRUN_NCCL_ROOT": "nohostport"}, nccl.Launch{}, "missing port"},
	} {
		got, err := nccl.LaunchFromEnv(func(k string) string { return tc.env[k] })
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want %q", tc.env, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%v: %+v, %v; want %+v", tc.env, got, err, tc.want)
		}
	}
}

// TestLibrary opens libnccl.so.2 when it is installed, and otherwise
// checks that every entry point reports rt.ErrUnavailable. The
// collectives themselves need GPUs: nothing here calls ncclAllReduce.
func TestLibrary(t *testing.T) {
	if err := nccl.Available(); err != nil {
		if !errors.Is(err, rt.ErrUnavailable) {
			t.Fatalf("Available: %v does not wrap rt.ErrUnavailable", err)
		}
		if _, err := nccl.GetUniqueID(); !errors.Is(err, rt.ErrUnavailable) {
			t.Errorf("GetUniqueID without NCCL: %v", err)
		}
		if _, err := nccl.InitAll([]int{0}); !errors.Is(err, rt.ErrUnavailable) {
			t.Errorf("InitAll without NCCL: %v", err)
		}
		t.Skipf("NCCL is not installed here (%v): the shim is built but not run", err)
	}
	v, lib, err := nccl.Version()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: NCCL version code %d", lib, v)
	id, err := nccl.GetUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	if id == (nccl.UniqueID{}) {
		t.Error("ncclGetUniqueId returned an all-zero id")
	}
}
