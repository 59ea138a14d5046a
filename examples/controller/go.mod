module github.com/taintkit/taintkit/examples/controller

go 1.26.0

replace github.com/taintkit/taintkit => ../..
