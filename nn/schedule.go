package nn

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
)

// Learning-rate schedules run on the host: the learning rate is a
// run-time value of a training step, so a schedule sets it between steps
// with engine.Trainer.SetLR and nothing is planned or recorded again:
//
//	s, _ := nn.WarmupCosineLR(0.1, 5, 0.1, steps, 0)
//	for k := 0; k < steps; k++ {
//		tr.SetLR(s.LR(k))
//		tr.Step(ctx, batch(k))
//	}
//
// Each schedule follows torch.optim.lr_scheduler: LR(k) is the rate that
// torch's param_groups[0]["lr"] holds after k calls of scheduler.step().
// Schedules are closed forms of the step number (restarting from a
// checkpoint needs only the step count); ReduceLROnPlateau depends on the
// metrics it is given and is the stateful [Plateau].

// Schedule gives the learning rate of each optimizer step.
type Schedule interface {
	// LR returns the learning rate of step k (0-based). k < 0 is treated
	// as 0.
	LR(k int) float64
}

type scheduleFunc func(k int) float64

func (f scheduleFunc) LR(k int) float64 { return f(max(k, 0)) }

func checkRate(name string, v float64) error {
	if !(v >= 0) || math.IsInf(v, 0) {
		return fmt.Errorf("nn: %s %g: want a finite rate >= 0", name, v)
	}
	return nil
}

func checkFactor(name string, v float64) error {
	if !(v > 0) || math.IsInf(v, 0) {
		return fmt.Errorf("nn: %s %g: want a finite factor > 0", name, v)
	}
	return nil
}

// StepLR multiplies the rate by gamma every stepSize steps:
// base·gamma^⌊k/stepSize⌋ (torch's StepLR).
func StepLR(base float64, stepSize int, gamma float64) (Schedule, error) {
	if err := errors.Join(checkRate("StepLR: base rate", base), checkFactor("StepLR: gamma", gamma)); err != nil {
		return nil, err
	}
	if stepSize <= 0 {
		return nil, fmt.Errorf("nn: StepLR: step size %d: want > 0", stepSize)
	}
	return scheduleFunc(func(k int) float64 { return base * math.Pow(gamma, float64(k/stepSize)) }), nil
}

// MultiStepLR multiplies the rate by gamma at each milestone step:
// base·gamma^(number of milestones <= k) (torch's MultiStepLR; a milestone
// listed twice counts twice).
func MultiStepLR(base float64, milestones []int, gamma float64) (Schedule, error) {
	if err := errors.Join(checkRate("MultiStepLR: base rate", base), checkFactor("MultiStepLR: gamma", gamma)); err != nil {
		return nil, err
	}
	ms := slices.Clone(milestones)
	sort.Ints(ms)
	for _, m := range ms {
		if m < 0 {
			return nil, fmt.Errorf("nn: MultiStepLR: negative milestone %d", m)
		}
	}
	return scheduleFunc(func(k int) float64 {
		n := sort.Search(len(ms), func(i int) bool { return ms[i] > k }) // bisect_right
		return base * math.Pow(gamma, float64(n))
	}), nil
}

// ExponentialLR multiplies the rate by gamma every step: base·gamma^k
// (torch's ExponentialLR).
func ExponentialLR(base, gamma float64) (Schedule, error) {
	if err := errors.Join(checkRate("ExponentialLR: base rate", base), checkFactor("ExponentialLR: gamma", gamma)); err != nil {
		return nil, err
	}
	return scheduleFunc(func(k int) float64 { return base * math.Pow(gamma, float64(k)) }), nil
}

// WarmupCosineLR warms up linearly from base·startFactor to base over
// warmup steps, then anneals to minLR along a half cosine that reaches it
// at step total, and stays at minLR after that. It is torch's
// SequentialLR of LinearLR(start_factor, total_iters=warmup) and
// CosineAnnealingLR(T_max=total-warmup, eta_min=minLR), milestone warmup;
// warmup 0 is CosineAnnealingLR alone. (Past total, torch's cosine is
// periodic and climbs back; this one stays at minLR.)
func WarmupCosineLR(base float64, warmup int, startFactor float64, total int, minLR float64) (Schedule, error) {
	if err := errors.Join(checkRate("WarmupCosineLR: base rate", base), checkRate("WarmupCosineLR: minimum rate", minLR)); err != nil {
		return nil, err
	}
	if warmup < 0 || total <= warmup {
		return nil, fmt.Errorf("nn: WarmupCosineLR: warm-up %d and total %d steps: want 0 <= warm-up < total", warmup, total)
	}
	if warmup > 0 && (!(startFactor > 0) || startFactor > 1) {
		return nil, fmt.Errorf("nn: WarmupCosineLR: start factor %g: want 0 < factor <= 1", startFactor)
	}
	return scheduleFunc(func(k int) float64 {
		switch {
		case k < warmup:
			return base * (startFactor + (1-startFactor)*float64(k)/float64(warmup))
		case k >= total:
			return minLR
		}
		e, t := float64(k-warmup), float64(total-warmup)
		return minLR + (base-minLR)*(1+math.Cos(math.Pi*e/t))/2
	}), nil
}

// OneCycleOptions configures OneCycleLR; zero fields take torch's
// defaults.
type OneCycleOptions struct {
	// PctStart is the fraction of the steps spent raising the rate
	// (default 0.3).
	PctStart float64
	// DivFactor sets the initial rate, maxLR/DivFactor (default 25).
	DivFactor float64
	// FinalDivFactor sets the final rate, initial/FinalDivFactor
	// (default 1e4).
	FinalDivFactor float64
}

// OneCycleLR is the 1cycle policy with cosine annealing (torch's
// OneCycleLR, anneal_strategy "cos", two phases): the rate rises from
// maxLR/DivFactor to maxLR over the first PctStart of total steps, then
// falls to maxLR/DivFactor/FinalDivFactor at step total-1, and stays there.
// torch also cycles the momentum (or Adam's beta1) inversely to the rate;
// this schedule does not: it sets the learning rate only, and matches
// torch's OneCycleLR with cycle_momentum=False.
func OneCycleLR(maxLR float64, total int, o OneCycleOptions) (Schedule, error) {
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.PctStart, 0.3)
	def(&o.DivFactor, 25)
	def(&o.FinalDivFactor, 1e4)
	if err := errors.Join(checkRate("OneCycleLR: maximum rate", maxLR), checkFactor("OneCycleLR: div factor", o.DivFactor),
		checkFactor("OneCycleLR: final div factor", o.FinalDivFactor)); err != nil {
		return nil, err
	}
	if !(o.PctStart > 0 && o.PctStart < 1) {
		return nil, fmt.Errorf("nn: OneCycleLR: pct_start %g: want 0 < pct_start < 1", o.PctStart)
	}
	end1 := o.PctStart*float64(total) - 1 // torch: float(pct_start * total_steps) - 1
	end2 := float64(total - 1)
	if !(end1 > 0) || !(end2 > end1) {
		return nil, fmt.Errorf("nn: OneCycleLR: %d steps with pct_start %g leave a phase empty", total, o.PctStart)
	}
	initial := maxLR / o.DivFactor
	final := initial / o.FinalDivFactor
	cos := func(start, end, pct float64) float64 { return end + (start-end)/2*(math.Cos(math.Pi*pct)+1) }
	return scheduleFunc(func(k int) float64 {
		s := float64(min(k, total-1))
		if s <= end1 {
			return cos(initial, maxLR, s/end1)
		}
		return cos(maxLR, final, (s-end1)/(end2-end1))
	}), nil
}

// PlateauOptions configures a Plateau; see DefaultPlateauOptions for
// torch's defaults. Fields are taken as given.
type PlateauOptions struct {
	// Max: the metric should rise (torch mode "max"); false: it should
	// fall ("min").
	Max bool
	// Factor multiplies the rate at each reduction (0 < Factor < 1).
	Factor float64
	// Patience is how many steps without improvement are tolerated; the
	// rate drops on the next one.
	Patience int
	// Threshold is how much better than the best a metric must be to
	// count as an improvement: relatively (best·(1∓Threshold)) or, with
	// AbsThreshold, absolutely (best∓Threshold).
	Threshold    float64
	AbsThreshold bool
	// Cooldown is how many steps after a reduction are not counted.
	Cooldown int
	// MinLR bounds the rate from below.
	MinLR float64
	// Eps: a reduction smaller than Eps is not applied.
	Eps float64
}

// DefaultPlateauOptions returns torch's ReduceLROnPlateau defaults: mode
// min, factor 0.1, patience 10, threshold 1e-4 relative, cooldown 0,
// min_lr 0, eps 1e-8.
func DefaultPlateauOptions() PlateauOptions {
	return PlateauOptions{Factor: 0.1, Patience: 10, Threshold: 1e-4, Eps: 1e-8}
}

// Plateau lowers the learning rate when a metric (a validation loss, say)
// stops improving: torch's ReduceLROnPlateau. Call Step with each new
// metric and set the rate it returns. A Plateau is not safe for
// concurrent use.
type Plateau struct {
	o        PlateauOptions
	lr       float64
	best     float64
	bad      int
	cooldown int
	steps    int
}

// NewPlateau returns a Plateau starting at rate lr.
func NewPlateau(lr float64, o PlateauOptions) (*Plateau, error) {
	if err := errors.Join(checkRate("Plateau: rate", lr), checkRate("Plateau: minimum rate", o.MinLR),
		checkRate("Plateau: threshold", o.Threshold), checkRate("Plateau: eps", o.Eps)); err != nil {
		return nil, err
	}
	if !(o.Factor > 0 && o.Factor < 1) {
		return nil, fmt.Errorf("nn: Plateau: factor %g: want 0 < factor < 1", o.Factor)
	}
	if o.Patience < 0 || o.Cooldown < 0 {
		return nil, fmt.Errorf("nn: Plateau: negative patience %d or cooldown %d", o.Patience, o.Cooldown)
	}
	p := &Plateau{o: o, lr: lr, best: math.Inf(1)}
	if o.Max {
		p.best = math.Inf(-1)
	}
	return p, nil
}

// better reports whether metric a improves on the best so far.
func (p *Plateau) better(a float64) bool {
	t := p.o.Threshold
	switch {
	case !p.o.Max && !p.o.AbsThreshold:
		return a < p.best*(1-t)
	case !p.o.Max:
		return a < p.best-t
	case !p.o.AbsThreshold:
		return a > p.best*(1+t)
	}
	return a > p.best+t
}

// Step records a metric and returns the learning rate of the next step.
// A NaN metric counts as no improvement.
func (p *Plateau) Step(metric float64) float64 {
	p.steps++
	if p.better(metric) {
		p.best, p.bad = metric, 0
	} else {
		p.bad++
	}
	if p.cooldown > 0 {
		p.cooldown--
		p.bad = 0
	}
	if p.bad > p.o.Patience {
		if lr := max(p.lr*p.o.Factor, p.o.MinLR); p.lr-lr > p.o.Eps {
			p.lr = lr
		}
		p.cooldown, p.bad = p.o.Cooldown, 0
	}
	return p.lr
}

// LR returns the current learning rate.
func (p *Plateau) LR() float64 { return p.lr }

// Best returns the best metric so far (±Inf before the first Step).
func (p *Plateau) Best() float64 { return p.best }

// Steps returns how many metrics Step has recorded.
func (p *Plateau) Steps() int { return p.steps }
