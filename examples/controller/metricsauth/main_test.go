package metricsauth_test

import (
	"testing"

	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}) }
