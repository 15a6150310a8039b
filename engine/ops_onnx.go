package engine

import (
	"errors"
	"fmt"
)

// ErrUnsupportedFeature is wrapped when a supported op is used in a way the
// engine does not implement: an attribute value, an optional output or an
// input dtype. It tells such models apart from malformed ones.
var ErrUnsupportedFeature = errors.New("unsupported feature")

// unsupported returns an error wrapping ErrUnsupportedFeature.
func (c *nodeCtx) unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsupportedFeature, fmt.Sprintf(format, args...))
}
