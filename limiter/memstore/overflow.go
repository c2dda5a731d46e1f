package memstore

import (
	"hash/maphash"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/costgate/costgate/internal/loggate"
	"github.com/costgate/costgate/limiter"
)

// The overflow states. A new key that finds its shard at the cap with
// every state denying cannot take a state's place without unlocking it,
// and cannot be refused as a store error either: on_store_error: allow
// would then serve every newcomer unlimited, so that a flood of locked
// identities turned the policy off. It is decided instead by its policy's
// overflow state: one key's quota, shared by every key that found no room
// (the same algorithm and numbers, kept apart from the shards). Each such
// decision is counted (Options.OnOverflow, Store.Overflows) and logged, at
// most once a second per policy.

// overflowMark starts the Receipt.Entry of a charge the overflow state
// took, so that its Undo gives it back there.
const overflowMark = "overflow:"

// overflowKey is the overflow state's key in the overflow shard, which
// holds nothing else.
const overflowKey = ""

// maxOverflowStates bounds the overflow shard: one state per policy.
const maxOverflowStates = 1 << 16

// overflow is a Store's overflow states and what it says about them.
type overflow struct {
	sh      shard
	tag     uint32
	count   atomic.Uint64
	onOver  func(policy string)
	logger  *slog.Logger
	maxKeys int
	gates   sync.Map // policy name → *loggate.Gate
}

func (o *overflow) init(seed maphash.Seed, opts *Options, maxKeys int) {
	o.sh.maxKeys, o.sh.seed, o.sh.nextDue = maxOverflowStates, seed, math.MaxInt64
	o.tag = uint32(maphash.String(seed, overflowKey))
	o.onOver, o.logger, o.maxKeys = opts.OnOverflow, opts.Logger, maxKeys
	if o.logger == nil {
		o.logger = slog.Default()
	}
}

// isOverflow reports a receipt the overflow state charged, and returns it
// as the state itself wrote it.
func isOverflow(r *limiter.Receipt) (limiter.Receipt, bool) {
	if r == nil || !strings.HasPrefix(r.Entry, overflowMark) {
		return limiter.Receipt{}, false
	}
	own := *r
	own.Entry = strings.TrimPrefix(r.Entry, overflowMark)
	return own, true
}

// step runs the algorithm step for a key that found no room (or the undo
// of a charge the overflow state took) on p's overflow state.
func (o *overflow) step(p *limiter.Policy, pr params, now, cost int64, undo *limiter.Receipt, r *result) error {
	*r = result{}
	var offset int64
	if pr.alg == fixedWindow {
		offset = p.WindowOffset(overflowKey)
	}
	o.sh.mu.Lock()
	err := o.sh.step(p, pr, overflowKey, o.tag, now, cost, offset, undo, r)
	o.sh.mu.Unlock()
	if err != nil {
		return err
	}
	if r.receipt.Cost > 0 {
		r.receipt.Entry = overflowMark + r.receipt.Entry
	}
	if undo == nil {
		o.decided(p)
	}
	return nil
}

// decided counts and logs one decision of p's overflow state.
func (o *overflow) decided(p *limiter.Policy) {
	o.count.Add(1)
	if o.onOver != nil {
		o.onOver(p.Name)
	}
	g, ok := o.gates.Load(p.Name)
	if !ok {
		g, _ = o.gates.LoadOrStore(p.Name, &loggate.Gate{})
	}
	if n, ok := g.(*loggate.Gate).Pass(time.Now()); ok {
		o.logger.Warn("memstore: at the key cap with every key denying: new keys share the policy's overflow state, one key's quota",
			slog.String("policy", p.Name), slog.Int("max_keys", o.maxKeys), slog.Int64("suppressed", n))
	}
}
