package invariants

import "reflect"

// IsNil reports whether v is nil or an interface holding a nil pointer,
// map, slice, function or channel: what a constructor must refuse when it
// is handed one, or the first call through it would panic instead.
func IsNil(v any) bool {
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
