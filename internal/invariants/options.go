package invariants

import "fmt"

// ApplyOptions applies opts to c in order with apply (an option type's
// method expression, Option.apply): the one way every package applies its
// options, so that each refuses the same things alike. A nil option, or an
// interface holding a nil value, is an error matching invalid, the
// package's ErrInvalidOption; an option's own error is returned as it is.
// Each package keeps its own sealed Option type, so that an option given
// to the wrong constructor does not compile.
func ApplyOptions[O, C any](c *C, opts []O, apply func(O, *C) error, invalid error) error {
	for _, o := range opts {
		if IsNil(o) {
			return fmt.Errorf("%w: nil option", invalid)
		}
		if err := apply(o, c); err != nil {
			return err
		}
	}
	return nil
}
