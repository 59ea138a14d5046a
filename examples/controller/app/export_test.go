package app

// Internals for the black-box tests of package app_test.
var (
	RunWithClients = run
	NodeHandler    = nodeHandler
	PodHandler     = podHandler
)
