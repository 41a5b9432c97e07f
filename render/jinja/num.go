package jinja

import (
	"errors"
	"fmt"
	"math"
	"math/big"
)

// Numbers as Python has them: ints of any size (int64, then *big.Int, bounded), floats, bools
// as ints; how a value reads as a number (toNum) or as an index (indexOf). Nothing here
// refers to another file of the package.

// num classifies a number: an int64 (bools are ints, as in Python), a *big.Int or a float.
type num struct {
	kind byte // 'i', 'b', 'f'; 0: not a number
	i    int64
	b    *big.Int
	f    float64
}

func toNum(v any) num {
	switch x := v.(type) {
	case int64:
		return num{kind: 'i', i: x}
	case float64:
		return num{kind: 'f', f: x}
	case bool:
		if x {
			return num{kind: 'i', i: 1}
		}
		return num{kind: 'i'}
	case *big.Int:
		return num{kind: 'b', b: x}
	case int:
		return num{kind: 'i', i: int64(x)}
	case int32:
		return num{kind: 'i', i: int64(x)}
	case uint:
		return num{kind: 'b', b: new(big.Int).SetUint64(uint64(x))}
	case float32:
		return num{kind: 'f', f: float64(x)}
	}
	return num{}
}

func (n num) big() *big.Int {
	if n.kind == 'b' {
		return n.b
	}
	return big.NewInt(n.i)
}

func (n num) float() (float64, error) {
	switch n.kind {
	case 'f':
		return n.f, nil
	case 'i':
		return float64(n.i), nil
	}
	f, _ := new(big.Float).SetInt(n.b).Float64()
	if math.IsInf(f, 0) {
		return 0, errors.New("int too large to convert to float")
	}
	return f, nil
}

// normBig returns b as an int64 when it fits.
func normBig(b *big.Int) any {
	if b.IsInt64() {
		return b.Int64()
	}
	return b
}

// maxIntBits bounds the ints the engine builds (10**20000 has ~66,000 bits): beyond, an
// operation could take the render's whole time budget in one step.
const maxIntBits = 1 << 17

func checkBits(b *big.Int) (any, error) {
	if b.BitLen() > maxIntBits {
		return nil, errIntTooLarge
	}
	return normBig(b), nil
}

var errIntTooLarge = fmt.Errorf("the result is an integer of more than %d bits: too large to compute here", maxIntBits)

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// indexOf reads an index: an int or a bool.
func indexOf(key any) (int64, bool) {
	switch k := key.(type) {
	case int64:
		return k, true
	case bool:
		return boolInt(k), true
	case *big.Int:
		return 1 << 62, true // out of range of anything
	}
	return 0, false
}
