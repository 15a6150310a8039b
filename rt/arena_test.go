package rt

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// Tensors live at the same time never overlap, offsets are aligned, and
// the arena is no larger than the sum of sizes.
func TestPlanArenaRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		n := 1 + rng.IntN(40)
		ls := make([]Lifetime, n)
		for i := range ls {
			first := rng.IntN(30)
			ls[i] = Lifetime{Size: int64(rng.IntN(5000)), First: first, Last: first + rng.IntN(10)}
		}
		p, err := PlanArena(ls, 256)
		if err != nil {
			t.Fatal(err)
		}
		if p.Size > p.Sum {
			t.Fatalf("trial %d: arena %d larger than the sum %d", trial, p.Size, p.Sum)
		}
		for i := range ls {
			if p.Offsets[i]%256 != 0 {
				t.Fatalf("offset %d not aligned", p.Offsets[i])
			}
			if p.Offsets[i]+ls[i].Size > p.Size {
				t.Fatalf("tensor %d [%d,+%d) beyond arena %d", i, p.Offsets[i], ls[i].Size, p.Size)
			}
			for j := 0; j < i; j++ {
				a, b := ls[i], ls[j]
				if a.Last < b.First || b.Last < a.First || a.Size == 0 || b.Size == 0 {
					continue
				}
				ao, bo := p.Offsets[i], p.Offsets[j]
				if ao < bo+b.Size && bo < ao+a.Size {
					t.Fatalf("trial %d: tensors %d %+v at %d and %d %+v at %d overlap", trial, i, a, ao, j, b, bo)
				}
			}
		}
	}
}

// A chain where each tensor dies as the next is born reuses two blocks.
func TestPlanArenaChain(t *testing.T) {
	var ls []Lifetime
	for i := 0; i < 10; i++ {
		ls = append(ls, Lifetime{Size: 1000, First: i, Last: i + 1})
	}
	p, err := PlanArena(ls, 256)
	if err != nil {
		t.Fatal(err)
	}
	if p.Size != 2*1024 {
		t.Errorf("arena %d, want %d", p.Size, 2*1024)
	}
	if p.Sum != 10*1024 {
		t.Errorf("sum %d, want %d", p.Sum, 10*1024)
	}
}

func TestPlanArenaErrors(t *testing.T) {
	if _, err := PlanArena(nil, 3); err == nil {
		t.Error("alignment 3 accepted")
	}
	if _, err := PlanArena([]Lifetime{{Size: 1, First: 2, Last: 1}}, 8); err == nil {
		t.Error("First > Last accepted")
	}
	if _, err := PlanArena([]Lifetime{{Size: -1}}, 8); err == nil {
		t.Error("negative size accepted")
	}
	// Sizes that would overflow the arena's sums.
	huge := []Lifetime{{Size: 1 << 62, First: 0, Last: 1}, {Size: 1 << 62, First: 0, Last: 1}}
	if _, err := PlanArena(huge, 256); !errors.Is(err, ErrTooLarge) {
		t.Errorf("2^62-byte tensors: %v, want ErrTooLarge", err)
	}
}
