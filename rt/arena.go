package rt

import (
	"fmt"
	"sort"
)

// Lifetime is one tensor's claim on the arena: Size bytes, live from the
// step that writes it (First) through the last step that reads it (Last).
type Lifetime struct {
	Size        int64
	First, Last int
}

// ArenaPlan is the result of [PlanArena].
type ArenaPlan struct {
	Offsets []int64 // byte offset of each lifetime, in input order
	Size    int64   // arena size in bytes
	Sum     int64   // sum of all aligned sizes (what no reuse would cost)
}

// PlanArena places every lifetime in one arena so that tensors live at the
// same time never overlap. It simulates execution step by step: tensors
// whose last use has passed free their block, and each new tensor takes the
// best-fitting free block (the smallest that fits, lowest offset on ties),
// growing the arena only when none fits. Offsets are multiples of align
// (a power of two).
func PlanArena(ls []Lifetime, align int64) (ArenaPlan, error) {
	if align <= 0 || align&(align-1) != 0 {
		return ArenaPlan{}, fmt.Errorf("rt: arena alignment %d is not a power of two", align)
	}
	plan := ArenaPlan{Offsets: make([]int64, len(ls))}
	order := make([]int, len(ls))
	for i := range order {
		order[i] = i
		l := ls[i]
		if l.Size < 0 || l.First > l.Last {
			return ArenaPlan{}, fmt.Errorf("rt: bad lifetime %d: size %d, steps %d..%d", i, l.Size, l.First, l.Last)
		}
		if l.Size > MaxTensorBytes {
			// Sizes below 2^48 sum without overflow for any plan that fits in memory.
			return ArenaPlan{}, &SizeError{What: fmt.Sprintf("arena tensor %d", i), Need: l.Size, Limit: MaxTensorBytes, Of: "that vrun allows for one tensor"}
		}
	}
	// Allocate in order of first use; larger first within a step.
	sort.SliceStable(order, func(a, b int) bool {
		la, lb := ls[order[a]], ls[order[b]]
		if la.First != lb.First {
			return la.First < lb.First
		}
		return la.Size > lb.Size
	})
	var free []block // sorted by offset, coalesced
	type live struct {
		last int
		blk  block
	}
	var lives []live
	release := func(step int) {
		keep := lives[:0]
		for _, l := range lives {
			if l.last < step {
				free = insertFree(free, l.blk.off, l.blk.size)
			} else {
				keep = append(keep, l)
			}
		}
		lives = keep
	}
	for _, i := range order {
		l := ls[i]
		release(l.First)
		size := (l.Size + align - 1) &^ (align - 1)
		if size == 0 {
			size = align
		}
		plan.Sum += size
		best := -1
		for j, f := range free {
			if f.size >= size && (best < 0 || f.size < free[best].size) {
				best = j
			}
		}
		var off int64
		switch {
		case best >= 0:
			off = free[best].off
			free[best].off += size
			free[best].size -= size
			if free[best].size == 0 {
				free = append(free[:best], free[best+1:]...)
			}
		case len(free) > 0 && free[len(free)-1].off+free[len(free)-1].size == plan.Size:
			// Extend the free block at the end of the arena.
			last := free[len(free)-1]
			off = last.off
			plan.Size = off + size
			free = free[:len(free)-1]
		default:
			off = plan.Size
			plan.Size += size
		}
		plan.Offsets[i] = off
		lives = append(lives, live{last: l.Last, blk: block{off, size}})
	}
	return plan, nil
}

type block struct{ off, size int64 }

func insertFree(free []block, off, size int64) []block {
	i := sort.Search(len(free), func(i int) bool { return free[i].off > off })
	free = append(free, block{})
	copy(free[i+1:], free[i:])
	free[i] = block{off, size}
	// Coalesce with neighbours.
	if i+1 < len(free) && free[i].off+free[i].size == free[i+1].off {
		free[i].size += free[i+1].size
		free = append(free[:i+1], free[i+2:]...)
	}
	if i > 0 && free[i-1].off+free[i-1].size == free[i].off {
		free[i-1].size += free[i].size
		free = append(free[:i], free[i+1:]...)
	}
	return free
}
