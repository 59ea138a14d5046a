package sharding

// ring is a FIFO of T on a power-of-two circular buffer. It grows by
// doubling and shrinks by halving when a quarter full, down to keepRing
// slots, so its memory follows its length both ways. push and pop are
// amortised O(1). Popped slots are zeroed so the buffer keeps no item alive.
// The zero ring is empty.
type ring[T any] struct {
	buf  []T
	head int // index of the front item
	n    int // number of items
}

const (
	minRing = 8 // the first buffer
	// keepRing is the size below which a ring does not shrink. Halving at
	// a quarter is amortised O(1), but for a lane going between a few
	// items and a few more (a worker keeping up with its adds) it would
	// allocate a small buffer every few operations: at 500,000 pod updates
	// in the noexecute demo, 74 MB of buffers. A few KiB per lane is kept
	// instead.
	keepRing = 256
)

func (r *ring[T]) len() int { return r.n }

func (r *ring[T]) push(v T) {
	if r.n == len(r.buf) {
		r.resize(max(minRing, 2*len(r.buf)))
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = v
	r.n++
}

// pop removes and returns the front item. r must not be empty.
func (r *ring[T]) pop() T {
	var zero T
	v := r.buf[r.head]
	r.buf[r.head] = zero
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	if len(r.buf) > keepRing && r.n <= len(r.buf)/4 {
		r.resize(len(r.buf) / 2)
	}
	return v
}

// resize moves the items, in order, to a new buffer of size (a power of
// two, at least r.n).
func (r *ring[T]) resize(size int) {
	buf := make([]T, size)
	if r.n > 0 {
		k := copy(buf, r.buf[r.head:min(len(r.buf), r.head+r.n)])
		copy(buf[k:], r.buf[:r.n-k])
	}
	r.buf, r.head = buf, 0
}
