// Package actat is what the two example controllers that act at a time
// (examples/actor on client-go, examples/controller-runtime/actor) share:
// an object's act-at annotation, when its action is due, and the patch
// that records the action done.
package actat

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotation says when to act on an object, in RFC 3339
// ("2026-01-02T15:04:05Z", fractional seconds allowed). It may be set,
// changed or removed at any time.
const Annotation = "taintkit.example/act-at"

// ActedAnnotation holds the value of Annotation an object was acted on for:
// the action's record, which the action writes.
const ActedAnnotation = "taintkit.example/acted-at"

// Due returns when obj's action is due and reports whether one is: not if
// obj has no Annotation, is being deleted, or was acted on for this time. An
// Annotation that is not a time is an error, and no action is due.
func Due(obj metav1.Object) (at time.Time, due bool, err error) {
	value, ok := obj.GetAnnotations()[Annotation]
	if !ok || obj.GetDeletionTimestamp() != nil || obj.GetAnnotations()[ActedAnnotation] == value {
		return time.Time{}, false, nil
	}
	at, err = time.Parse(time.RFC3339, value)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("actat: %s: %w", Annotation, err)
	}
	return at, true, nil
}

// ActedPatch returns the JSON merge patch that records obj acted on for its
// Annotation. It carries obj's resourceVersion: the API server refuses it
// with 409 Conflict if obj changed since it was read (its time may have
// moved), and the controller reads it again.
func ActedPatch(obj metav1.Object) []byte {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": obj.GetResourceVersion(),
		"annotations":     map[string]string{ActedAnnotation: obj.GetAnnotations()[Annotation]},
	}})
	if err != nil {
		panic(err) // strings only
	}
	return patch
}
