package app

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RESTConfig returns the client configuration from the kubeconfig file at
// path, or, if path is empty, the in-cluster configuration (the pod's
// service account token and the KUBERNETES_SERVICE_* variables).
func RESTConfig(path string) (*rest.Config, error) {
	if path == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("app: no --kubeconfig given and no in-cluster configuration: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("app: kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}
