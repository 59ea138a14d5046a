package main

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/scenario.golden")

// The scripted scenario prints the same timeline on every run: it settles
// with Manager.WaitIdle, which observes the manager's goroutines, so this
// test also checks WaitIdle outside a synctest bubble.
func TestScenarioTimeline(t *testing.T) {
	var first bytes.Buffer
	require.NoError(t, runScenario(&first, nil, logger(-1)))
	if *update {
		require.NoError(t, os.WriteFile("testdata/scenario.golden", first.Bytes(), 0o644))
	}
	want, err := os.ReadFile("testdata/scenario.golden")
	require.NoError(t, err)
	assert.Equal(t, string(want), first.String())

	for range 5 {
		var again bytes.Buffer
		require.NoError(t, runScenario(&again, nil, logger(-1)))
		require.Equal(t, first.String(), again.String())
	}
}

func TestScaleRunSmall(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, runScale(&out, 20, 10, logger(-1)))
	assert.Contains(t, out.String(), "Evicted 200 pods in ")
}
