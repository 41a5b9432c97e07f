package jinja

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Python's list methods. A list from the data is read only: the methods that change a list
// work on the template's own lists (*List).

func (e *evaluator) listMethod(obj any, name string, a []any, kw map[string]any) (any, error) {
	l, mutable := obj.(*List)
	switch name {
	case "index", "count":
		return e.seqSearch(listItems(obj), name, a)
	case "copy":
		return &List{items: append([]any(nil), listItems(obj)...)}, nil
	}
	if !mutable {
		return nil, fmt.Errorf("list.%s(): this list comes from the input data, which templates cannot change: copy it first (x|list)", name)
	}
	l.changing()
	switch name {
	case "append":
		if err := argCount(name, a, 1, 1); err != nil {
			return nil, err
		}
		if err := e.checkItems(len(l.items) + 1); err != nil {
			return nil, err
		}
		l.items = append(l.items, a[0])
		return nil, nil
	case "extend":
		if err := argCount(name, a, 1, 1); err != nil {
			return nil, err
		}
		items, err := e.readItems(a[0]) // appended at once (l.extend(l) doubles l, as in Python)
		if err != nil {
			return nil, err
		}
		if err := e.checkItems(len(l.items) + len(items)); err != nil {
			return nil, err
		}
		l.items = appendDoubling(l.items, items, e.extendRoom(l, len(l.items)+len(items)))
		return nil, nil
	case "insert":
		return nil, e.listInsert(l, a)
	case "pop":
		return listPop(l, a)
	case "remove":
		if err := argCount(name, a, 1, 1); err != nil {
			return nil, err
		}
		for i, x := range l.items {
			if equal(x, a[0]) {
				l.items = append(l.items[:i], l.items[i+1:]...)
				return nil, nil
			}
		}
		return nil, errors.New("list.remove(x): x not in list")
	case "clear":
		l.items = l.items[:0]
		return nil, nil
	case "reverse":
		for i, j := 0, len(l.items)-1; i < j; i, j = i+1, j-1 {
			l.items[i], l.items[j] = l.items[j], l.items[i]
		}
		return nil, nil
	case "sort":
		return nil, listSort(l, a, kw)
	}
	return nil, fmt.Errorf("'list' object has no attribute '%s'", name)
}

// listInsert is l.insert(i, x).
func (e *evaluator) listInsert(l *List, a []any) error {
	if err := argCount("insert", a, 2, 2); err != nil {
		return err
	}
	i, ok := indexOf(a[0])
	if !ok {
		return fmt.Errorf("'%s' object cannot be interpreted as an integer", typeName(a[0]))
	}
	n := int64(len(l.items))
	if i < 0 {
		i = max(i+n, 0)
	}
	i = min(i, n)
	if err := e.checkItems(len(l.items) + 1); err != nil {
		return err
	}
	l.items = append(l.items, nil)
	copy(l.items[i+1:], l.items[i:])
	l.items[i] = a[1]
	return nil
}

// listPop is l.pop() and l.pop(i).
func listPop(l *List, a []any) (any, error) {
	if err := argCount("pop", a, 0, 1); err != nil {
		return nil, err
	}
	if len(l.items) == 0 {
		return nil, errors.New("pop from empty list")
	}
	i := int64(len(l.items) - 1)
	if len(a) == 1 {
		var ok bool
		if i, ok = indexOf(a[0]); !ok {
			return nil, fmt.Errorf("'%s' object cannot be interpreted as an integer", typeName(a[0]))
		}
		if i < 0 {
			i += int64(len(l.items))
		}
		if i < 0 || i >= int64(len(l.items)) {
			return nil, errors.New("pop index out of range")
		}
	}
	v := l.items[i]
	l.items = append(l.items[:i], l.items[i+1:]...)
	return v, nil
}

// listSort is l.sort(reverse=False) (key= is not supported).
func listSort(l *List, a []any, kw map[string]any) error {
	if len(a) > 0 {
		return errors.New("sort() takes no positional arguments")
	}
	reverse := false
	for k, v := range kw {
		if k != "reverse" {
			return fmt.Errorf("sort() got an unexpected keyword argument '%s' (key= is not supported)", k)
		}
		reverse = truthy(v)
	}
	return sortValues(l.items, func(x any) (any, error) { return x, nil }, reverse)
}

// sortValues sorts items stably by key, as Python's sorted() (reverse keeps stability).
func sortValues(items []any, key func(any) (any, error), reverse bool) error {
	sorted, err := sortedValues(items, key, reverse)
	if err != nil {
		return err
	}
	copy(items, sorted)
	return nil
}

// sortedValues is items sorted stably by key (sortValues), in a slice of its own: the keys'
// (items are left as they are; the HTTPRoute model sorts lists of 3,000 to 6,000 items per
// sync).
func sortedValues(items []any, key func(any) (any, error), reverse bool) ([]any, error) {
	keys := make([]any, len(items))
	for i, it := range items {
		k, err := key(it)
		if err != nil {
			return nil, err
		}
		keys[i] = k
	}
	idx, err := sortOrder(keys, reverse)
	if err != nil {
		return nil, err
	}
	for i, j := range idx {
		keys[i] = items[j]
	}
	return keys, nil
}

// sortOrder is the order of keys sorted stably, as Python's sorted() (reverse keeps
// stability): idx[i] is the index of the i-th key.
func sortOrder(keys []any, reverse bool) ([]int, error) {
	idx := make([]int, len(keys))
	for i := range idx {
		idx[i] = i
	}
	if allStrings(keys) {
		if stringsInOrder(keys, reverse) {
			return idx, nil // a stable sort keeps each where it is
		}
		// The common case (names, times): compared as strings are, without compare's switch.
		slices.SortStableFunc(idx, func(i, j int) int {
			if reverse {
				i, j = j, i
			}
			return strings.Compare(keys[i].(string), keys[j].(string))
		})
		return idx, nil
	}
	var err error
	sort.SliceStable(idx, func(i, j int) bool {
		a, b := keys[idx[i]], keys[idx[j]]
		if reverse {
			a, b = b, a
		}
		c, cerr := compare(a, b, "<")
		if cerr != nil && err == nil {
			err = cerr
		}
		return c < 0
	})
	return idx, err
}

// stringsInOrder says whether the string keys are in the order a stable sort gives them
// already (each not after the next; reverse: not before it). Lists often are: the HTTPRoute
// example sorts its routes by creation time and the merged keys of its routes, made in that
// order, at each sync; checking costs a comparison per key, sorting about twelve at 3,000.
func stringsInOrder(keys []any, reverse bool) bool {
	for i := 1; i < len(keys); i++ {
		c := strings.Compare(keys[i-1].(string), keys[i].(string))
		if reverse {
			c = -c
		}
		if c > 0 {
			return false
		}
	}
	return true
}

// allStrings says whether every key is a plain string.
func allStrings(keys []any) bool {
	for _, k := range keys {
		if _, ok := k.(string); !ok {
			return false
		}
	}
	return true
}

func (e *evaluator) seqSearch(items []any, name string, a []any) (any, error) {
	switch name {
	case "count":
		if err := argCount(name, a, 1, 1); err != nil {
			return nil, err
		}
		n := int64(0)
		for _, x := range items {
			if equal(x, a[0]) {
				n++
			}
		}
		return n, nil
	case "index":
		if err := argCount(name, a, 1, 3); err != nil {
			return nil, err
		}
		for i, x := range items {
			if equal(x, a[0]) {
				return int64(i), nil
			}
		}
		return nil, fmt.Errorf("%s is not in list", pyReprOrName(a[0]))
	}
	return nil, fmt.Errorf("no method %s", name)
}

// appendDoubling is append(dst, src...) with at least twice dst's room when it grows: a list
// extended block by block to 20,000 items (the Ingress example's routes) grows by a quarter
// at a time with append past a few hundred items, and allocates five times its size. Only
// extend grows so: a list appended to an item at a time is usually small and often kept (a
// module's export), where doubling's spare room would be held until the next render (0.7 MB
// more live heap at 3,000 HTTPRoutes when append doubled too). room: at least that much room
// when it grows (extendRoom: the last render's list at the same site).
func appendDoubling(dst, src []any, room int) []any {
	n := len(dst) + len(src)
	if n <= cap(dst) {
		return append(dst, src...)
	}
	grown := make([]any, len(dst), max(n, 2*cap(dst), room))
	copy(grown, dst)
	return append(grown, src...)
}
