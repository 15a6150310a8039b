package nccl

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Launch is a process's place in a multi-node run: its rank, the number
// of ranks, and the address where rank 0 serves the communicator's unique
// id.
type Launch struct {
	Rank, NRanks int
	Root         string // host:port of rank 0's bootstrap listener
}

// Environment variables that LaunchFromEnv reads.
const (
	EnvRank   = "VRUN_NCCL_RANK"   // this process's rank, from 0
	EnvNRanks = "VRUN_NCCL_NRANKS" // the number of ranks
	EnvRoot   = "VRUN_NCCL_ROOT"   // host:port where rank 0 listens
)

// LaunchFromEnv reads a Launch from VRUN_NCCL_RANK, VRUN_NCCL_NRANKS and
// VRUN_NCCL_ROOT through getenv (os.Getenv).
func LaunchFromEnv(getenv func(string) string) (Launch, error) {
	var l Launch
	var err error
	num := func(key string) (int, error) {
		s := strings.TrimSpace(getenv(key))
		if s == "" {
			return 0, fmt.Errorf("nccl: %s is not set", key)
		}
		v, err := strconv.Atoi(s)
		if err != nil {
			return 0, fmt.Errorf("nccl: %s=%q is not a number", key, s)
		}
		return v, nil
	}
	if l.Rank, err = num(EnvRank); err != nil {
		return l, err
	}
	if l.NRanks, err = num(EnvNRanks); err != nil {
		return l, err
	}
	if l.NRanks < 1 || l.Rank < 0 || l.Rank >= l.NRanks {
		return l, fmt.Errorf("nccl: rank %d of %d ranks (%s, %s)", l.Rank, l.NRanks, EnvRank, EnvNRanks)
	}
	l.Root = strings.TrimSpace(getenv(EnvRoot))
	if l.NRanks > 1 {
		if l.Root == "" {
			return l, fmt.Errorf("nccl: %s is not set (host:port where rank 0 listens)", EnvRoot)
		}
		if _, _, err := net.SplitHostPort(l.Root); err != nil {
			return l, fmt.Errorf("nccl: %s=%q: %w", EnvRoot, l.Root, err)
		}
	}
	return l, nil
}

// The bootstrap protocol, one TCP connection per rank other than 0:
//
//	rank r → 0: "VRUNNCCL", uint32 version 1, uint32 r, uint32 nranks
//	0 → rank r: "VRUNNCCL", status 0, the 128-byte id
//	         or "VRUNNCCL", status 1, uint16 length, the error message
//
// All integers little-endian.
var magic = []byte("VRUNNCCL")

const (
	protoVersion = 1
	connTimeout  = 10 * time.Second
)

// ServeID hands id to each of the ranks 1 … nranks-1 that connect to ln,
// and returns once every one has it, or with an error naming the ranks
// still missing when ctx ends. Connections are answered concurrently, so
// a stalled client delays no one. A request for a rank already served,
// for another rank count, or in another protocol is refused with a
// message and does not count. ServeID closes ln when it returns.
func ServeID(ctx context.Context, ln net.Listener, id UniqueID, nranks int) error {
	defer ln.Close()
	if nranks < 1 {
		return fmt.Errorf("nccl: bootstrap: %d ranks", nranks)
	}
	var mu sync.Mutex
	served := make([]bool, nranks)
	served[0] = true
	left := nranks - 1
	all := make(chan struct{})
	if left == 0 {
		close(all)
	}
	missing := func() []int {
		mu.Lock()
		defer mu.Unlock()
		var out []int
		for r, ok := range served {
			if !ok {
				out = append(out, r)
			}
		}
		return out
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // ln closed: done or cancelled
			}
			go func() {
				defer c.Close()
				serveOne(c, id, nranks, func(rank int) bool {
					mu.Lock()
					defer mu.Unlock()
					if served[rank] {
						return false
					}
					served[rank] = true
					if left--; left == 0 {
						close(all)
					}
					return true
				})
			}()
		}
	}()
	select {
	case <-all:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("nccl: bootstrap: ranks %v did not fetch the id: %w", missing(), ctx.Err())
	}
}

// serveOne answers one connection; claim marks a rank served, false when
// it already was.
func serveOne(c net.Conn, id UniqueID, nranks int, claim func(rank int) bool) {
	c.SetDeadline(time.Now().Add(connTimeout))
	var req [len("VRUNNCCL") + 12]byte
	if _, err := io.ReadFull(c, req[:]); err != nil {
		return
	}
	if !bytes.Equal(req[:8], magic) {
		return // not ours: no answer
	}
	ver := binary.LittleEndian.Uint32(req[8:])
	rank := int(binary.LittleEndian.Uint32(req[12:]))
	n := int(binary.LittleEndian.Uint32(req[16:]))
	var why string
	switch {
	case ver != protoVersion:
		why = fmt.Sprintf("protocol version %d, rank 0 speaks %d", ver, protoVersion)
	case n != nranks:
		why = fmt.Sprintf("the rank expects %d ranks, rank 0 runs %d", n, nranks)
	case rank < 1 || rank >= nranks:
		why = fmt.Sprintf("rank %d is out of range 1..%d", rank, nranks-1)
	case !claim(rank):
		why = fmt.Sprintf("rank %d already joined (two processes were given the same rank)", rank)
	}
	resp := slices.Clone(magic)
	if why != "" {
		resp = append(resp, 1)
		resp = binary.LittleEndian.AppendUint16(resp, uint16(len(why)))
		resp = append(resp, why...)
		c.Write(resp)
		return
	}
	c.Write(append(append(resp, 0), id[:]...))
}

// FetchID fetches the unique id from rank 0 at addr for rank of nranks.
// Rank 0 may start later: connection failures are retried until ctx ends.
// A refusal by rank 0 (a wrong rank or rank count) is returned at once.
func FetchID(ctx context.Context, addr string, rank, nranks int) (UniqueID, error) {
	var id UniqueID
	var d net.Dialer
	wait := 50 * time.Millisecond
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			id, err = fetchOne(ctx, c, rank, nranks)
			c.Close()
			var ref *refusedError
			if err == nil || errors.As(err, &ref) {
				return id, err
			}
		}
		select {
		case <-ctx.Done():
			return id, fmt.Errorf("nccl: bootstrap: rank %d could not fetch the id from rank 0 at %s: %w (last error: %v)", rank, addr, ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// refusedError is rank 0's refusal of a request.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return "nccl: bootstrap: rank 0 refused: " + e.msg }

func fetchOne(ctx context.Context, c net.Conn, rank, nranks int) (UniqueID, error) {
	var id UniqueID
	dl := time.Now().Add(connTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	c.SetDeadline(dl)
	req := slices.Clone(magic)
	req = binary.LittleEndian.AppendUint32(req, protoVersion)
	req = binary.LittleEndian.AppendUint32(req, uint32(rank))
	req = binary.LittleEndian.AppendUint32(req, uint32(nranks))
	if _, err := c.Write(req); err != nil {
		return id, err
	}
	var head [9]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return id, err
	}
	if !bytes.Equal(head[:8], magic) {
		return id, &refusedError{"the server at this address is not a vrun NCCL bootstrap"}
	}
	if head[8] != 0 {
		var n [2]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return id, err
		}
		msg := make([]byte, binary.LittleEndian.Uint16(n[:]))
		if _, err := io.ReadFull(c, msg); err != nil {
			return id, err
		}
		return id, &refusedError{string(msg)}
	}
	_, err := io.ReadFull(c, id[:])
	return id, err
}

// Bootstrap gives every rank of l the same unique id: rank 0 makes it
// with newID (GetUniqueID), listens on l.Root's port (on every interface)
// and serves it to the other ranks; the others fetch it. A single rank
// just makes it.
func Bootstrap(ctx context.Context, l Launch, newID func() (UniqueID, error)) (UniqueID, error) {
	if l.Rank != 0 {
		return FetchID(ctx, l.Root, l.Rank, l.NRanks)
	}
	id, err := newID()
	if err != nil || l.NRanks == 1 {
		return id, err
	}
	_, port, err := net.SplitHostPort(l.Root)
	if err != nil {
		return id, fmt.Errorf("nccl: bootstrap: root %q: %w", l.Root, err)
	}
	ln, err := net.Listen("tcp", ":"+port)
	if err != nil {
		return id, fmt.Errorf("nccl: bootstrap: %w", err)
	}
	return id, ServeID(ctx, ln, id, l.NRanks)
}
