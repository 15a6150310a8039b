package rt

// OpLowerer is a backend's lowering of each op kind into its device work:
// one method per op family file (elementwise, reduce, matmul, conv, pool,
// indexed, optim). A lowering remembers its own errors and results;
// LowerOp only dispatches.
type OpLowerer interface {
	Unary(*Unary)
	Binary(*Binary)
	Where(*Where)
	Fill(*Fill)
	Reduce(*Reduce)
	Softmax(*Softmax)
	Normalize(*Normalize)
	MatMul(*MatMul)
	Conv(*Conv)
	ConvTranspose(*ConvTranspose)
	Pool(*Pool)
	Gather(*Gather)
	GatherElements(*GatherElements)
	ScatterElements(*ScatterElements)
	TopK(*TopK)
	OptimStep(*OptimStep)
}

// LowerOp calls l's method for op's kind and reports whether there is
// one (false for Fused and any op kind the interface does not list).
func LowerOp(op Op, l OpLowerer) bool {
	switch o := op.(type) {
	case *Unary:
		l.Unary(o)
	case *Binary:
		l.Binary(o)
	case *Where:
		l.Where(o)
	case *Fill:
		l.Fill(o)
	case *Reduce:
		l.Reduce(o)
	case *Softmax:
		l.Softmax(o)
	case *Normalize:
		l.Normalize(o)
	case *MatMul:
		l.MatMul(o)
	case *Conv:
		l.Conv(o)
	case *ConvTranspose:
		l.ConvTranspose(o)
	case *Pool:
		l.Pool(o)
	case *Gather:
		l.Gather(o)
	case *GatherElements:
		l.GatherElements(o)
	case *ScatterElements:
		l.ScatterElements(o)
	case *TopK:
		l.TopK(o)
	case *OptimStep:
		l.OptimStep(o)
	default:
		return false
	}
	return true
}
