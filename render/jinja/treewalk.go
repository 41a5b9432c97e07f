package jinja

import "reflect"

// walkTree calls visit with every pointer, struct and string reachable from v through
// pointers, interfaces, struct fields, slices, arrays and maps (keys too), a node before what it
// holds; visit returns false to leave what a node holds unvisited. An interface is looked
// through, so visit sees each node once. The template analyses (what a template reads, whether
// it changes what it is given) walk the parse tree with it.
func walkTree(v reflect.Value, visit func(reflect.Value) bool) {
	switch v.Kind() {
	case reflect.Interface:
		if !v.IsNil() {
			walkTree(v.Elem(), visit)
		}
	case reflect.Pointer:
		if v.IsNil() || (v.CanInterface() && !visit(v)) {
			return
		}
		walkTree(v.Elem(), visit)
	case reflect.Struct:
		if v.CanInterface() && !visit(v) {
			return
		}
		for i := range v.NumField() {
			walkTree(v.Field(i), visit)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			walkTree(v.Index(i), visit)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			walkTree(k, visit)
			walkTree(v.MapIndex(k), visit)
		}
	case reflect.String:
		visit(v) // even an unexported one: what a template names is never missed
	}
}
