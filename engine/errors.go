package engine

import (
	"errors"
	"fmt"

	"github.com/vrun-go/vrun/rt"
)

// Input errors, matched with errors.Is through an *InputError.
var (
	// ErrDType: an input's dtype is not the model's (rt.ErrDType).
	ErrDType = rt.ErrDType
	// ErrMissingInput: a model input was not given.
	ErrMissingInput = errors.New("missing input")
	// ErrUnknownInput: a tensor was given for a name that is not a model
	// input.
	ErrUnknownInput = errors.New("not a model input")
	// ErrDevice: a device tensor given to RunDevice is on another device
	// than the session's.
	ErrDevice = errors.New("input on another device")
)

// InputError reports a problem with one input of a run or one entry of
// Options.Shapes or Options.Dims. Err is ErrShape, ErrDType,
// ErrMissingInput or ErrUnknownInput (matched by errors.Is), or the
// tensor's own consistency error.
type InputError struct {
	Input string // the input's name (a dim name for Options.Dims)
	Err   error
	// Msg says what is wrong: `input "x": got shape [2 3], model wants
	// [-1 4]`.
	Msg string
}

func (e *InputError) Error() string {
	if e.Msg == "" {
		return fmt.Sprintf("engine: input %q: %v", e.Input, e.Err)
	}
	return "engine: " + e.Msg
}

// Unwrap returns Err.
func (e *InputError) Unwrap() error { return e.Err }

func inputErr(name string, err error, format string, args ...any) *InputError {
	return &InputError{Input: name, Err: err, Msg: fmt.Sprintf(format, args...)}
}
