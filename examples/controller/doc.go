// Command controller is the NoExecute taint manager of examples/noexecute/manager
// as a deployable Kubernetes controller on client-go.
package main
