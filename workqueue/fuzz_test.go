package workqueue_test

import "testing"

// FuzzQueue drives a queue and the reference with the calls data encodes:
// its first byte picks the constructor, each next pair of bytes a call (see
// op). CI replays the seed corpus in testdata/fuzz/FuzzQueue; go test -fuzz
// FuzzQueue explores.
func FuzzQueue(f *testing.F) {
	f.Add([]byte{0, 1, 0x09, 5, 0, 7, 4, 5, 0})                      // AddAfter, Step, Get
	f.Add([]byte{1, 2, 0x21, 2, 0x10, 5, 0, 0, 0, 5, 0, 6, 1, 6, 0}) // priorities
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		ops := make([]op, 0, len(data)/2)
		for i := 1; i+1 < len(data); i += 2 {
			ops = append(ops, op{data[i], data[i+1]})
		}
		runOps(t, data[0]%2 == 1, ops)
	})
}
