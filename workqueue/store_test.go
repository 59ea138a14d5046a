package workqueue

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

func TestEntryIsSmall(t *testing.T) {
	// The memory per waiting item depends on it: keep an eye on new fields.
	if unsafe.Sizeof(0) == 8 {
		assert.Equal(t, uintptr(40), unsafe.Sizeof(entry[string]{}))
	}
	assert.Equal(t, uintptr(8), unsafe.Sizeof(readyNode{}))
}
