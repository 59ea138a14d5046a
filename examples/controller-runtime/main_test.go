package main

import (
	"testing"

	"github.com/taintkit/taintkit/examples/controller-runtime/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
