// Package isnil tells whether an interface value is nil or holds a nil
// pointer, map, slice, function or channel: what a constructor must refuse
// when it is handed one, or the first call through it would panic instead.
package isnil

import "reflect"

// Value reports whether v is nil or an interface holding a nil value of a
// kind that can be nil.
func Value(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return rv.IsNil()
	}
	return false
}
