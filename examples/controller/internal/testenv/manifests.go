package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// fieldManager is the server-side apply manager of ApplyManifests.
const fieldManager = "taintkit-testenv"

// ApplyManifests applies the objects in the YAML or JSON files at paths, as
// the administrator, by server-side apply: an object that exists is updated to
// match, so applying the same manifests twice succeeds. A path that is a
// directory stands for its *.yaml, *.yml and *.json files (not recursively) in
// name order. A file may hold several documents separated by "---", and a
// document may be a v1 List. Namespaces are applied first; a namespaced object
// without a namespace goes to "default". It returns the objects as the server
// stored them, in the order applied, and stops at the first error.
//
// Any kind the server serves works: ServiceAccount, ClusterRole,
// ClusterRoleBinding, Role, RoleBinding, Deployment, Namespace and the rest.
// Remember that nothing acts on them: a Deployment creates no pods.
func (e *Env) ApplyManifests(ctx context.Context, paths ...string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, p := range paths {
		files, err := manifestFiles(p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			got, err := decodeManifests(f)
			if err != nil {
				return nil, err
			}
			objs = append(objs, got...)
		}
	}
	// Stable, so everything else keeps the order it was written in.
	sort.SliceStable(objs, func(i, j int) bool {
		return isNamespace(objs[i]) && !isNamespace(objs[j])
	})

	dyn, err := dynamic.NewForConfig(e.admin)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(e.client.Discovery()))
	applied := make([]*unstructured.Unstructured, 0, len(objs))
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return applied, fmt.Errorf("testenv: ApplyManifests: %s %q: %w", gvk, obj.GetName(), err)
		}
		var client dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == "namespace" {
			if obj.GetNamespace() == "" {
				obj.SetNamespace(metav1.NamespaceDefault)
			}
			client = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
		}
		out, err := client.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
		if err != nil {
			return applied, fmt.Errorf("testenv: ApplyManifests: %s %s/%s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
		}
		applied = append(applied, out)
	}
	return applied, nil
}

func isNamespace(u *unstructured.Unstructured) bool {
	gvk := u.GroupVersionKind()
	return gvk.Group == "" && gvk.Kind == "Namespace"
}

// manifestFiles expands a directory to its manifest files.
func manifestFiles(path string) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("testenv: ApplyManifests: %w", err)
	}
	if !fi.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("testenv: ApplyManifests: %w", err)
	}
	var files []string
	for _, de := range entries { // ReadDir sorts by name
		if !de.IsDir() && slices.Contains([]string{".yaml", ".yml", ".json"}, filepath.Ext(de.Name())) {
			files = append(files, filepath.Join(path, de.Name()))
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("testenv: ApplyManifests: no .yaml, .yml or .json files in %s", path)
	}
	return files, nil
}

// decodeManifests reads every document of a file, flattening Lists.
func decodeManifests(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("testenv: ApplyManifests: %w", err)
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("testenv: ApplyManifests: %s, document %d: %w", path, doc, err)
		}
		if len(m) == 0 { // an empty document, e.g. a trailing "---"
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("testenv: ApplyManifests: %s, document %d: %w", path, doc, err)
			}
			for i := range list.Items {
				objs = append(objs, &list.Items[i])
			}
			continue
		}
		if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("testenv: ApplyManifests: %s, document %d: apiVersion, kind and metadata.name are required", path, doc)
		}
		objs = append(objs, u)
	}
}
