// Command controller is the NoExecute taint manager of
// examples/internal/manager as a deployable Kubernetes controller: it
// evicts pods from nodes with NoExecute taints they do not tolerate, with
// leader election among its replicas, Prometheus metrics behind the API
// server's authentication and authorization, and health probes. See
// package app and README.md for flags and deployment; --help lists the
// flags by section, --version prints the build information.
//
// It exits 0 after SIGTERM or SIGINT (having released its lease), and after
// --help or --version, 1 on an error or when it lost its lease (a restart
// gives it a fresh manager), and 2 for invalid flags.
package main
