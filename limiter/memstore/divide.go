package memstore

import (
	"math"
	"math/bits"
)

// divisor divides non-negative int64s by d without a DIV instruction, which
// costs more than the rest of a bucket step: with inv = ⌊(2⁶⁴−1)/d⌋, the
// high word of n·inv is ⌊n/d⌋ or one less (the error is n/2⁶⁴ < 1), and
// one comparison of the remainder settles it. A policy's divisors are worked
// out once per shard, with its group.
type divisor struct{ d, inv uint64 }

func newDivisor(d int64) divisor { return divisor{uint64(d), math.MaxUint64 / uint64(d)} }

// divmod returns ⌊n/d⌋ and n mod d, for n ≥ 0.
func (v divisor) divmod(n int64) (q, r int64) {
	hi, _ := bits.Mul64(uint64(n), v.inv)
	rem := uint64(n) - hi*v.d
	if rem >= v.d {
		hi++
		rem -= v.d
	}
	return int64(hi), int64(rem)
}

func (v divisor) div(n int64) int64 {
	q, _ := v.divmod(n)
	return q
}

// ceil returns ⌈n/d⌉, for n ≥ 0.
func (v divisor) ceil(n int64) int64 {
	q, r := v.divmod(n)
	return q + b2i(r > 0)
}

// divisors are a bucket policy's: by the period and by the limit.
type divisors struct{ per, limit divisor }

func divisorsOf(pr params) divisors {
	return divisors{per: newDivisor(pr.per), limit: newDivisor(pr.limit)}
}
