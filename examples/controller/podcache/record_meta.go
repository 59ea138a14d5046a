package podcache

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// GetObjectMeta returns the record's object metadata, for client-go's
// key functions and informers (meta.Accessor): the name, namespace, UID,
// resourceVersion and deletionTimestamp it holds, and nothing for the rest.
// A record is never modified: the setters of what it returns do nothing.
// It does not allocate. A nil record returns nil.
func (r *Record) GetObjectMeta() metav1.Object {
	if r == nil {
		return nil
	}
	return (*recordMeta)(r)
}

// recordMeta is a Record seen as metav1.Object.
type recordMeta Record

func (m *recordMeta) GetNamespace() string       { return value(m.namespace) }
func (m *recordMeta) GetName() string            { return m.name }
func (m *recordMeta) GetUID() types.UID          { return m.uid }
func (m *recordMeta) GetResourceVersion() string { return m.resourceVersion }
func (m *recordMeta) GetDeletionTimestamp() *metav1.Time {
	return m.deletionTimestamp.DeepCopy()
}
func (*recordMeta) GetGenerateName() string                       { return "" }
func (*recordMeta) GetGeneration() int64                          { return 0 }
func (*recordMeta) GetSelfLink() string                           { return "" }
func (*recordMeta) GetCreationTimestamp() metav1.Time             { return metav1.Time{} }
func (*recordMeta) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (*recordMeta) GetLabels() map[string]string                  { return nil }
func (*recordMeta) GetAnnotations() map[string]string             { return nil }
func (*recordMeta) GetFinalizers() []string                       { return nil }
func (*recordMeta) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (*recordMeta) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (*recordMeta) SetNamespace(string)                           {}
func (*recordMeta) SetName(string)                                {}
func (*recordMeta) SetGenerateName(string)                        {}
func (*recordMeta) SetUID(types.UID)                              {}
func (*recordMeta) SetResourceVersion(string)                     {}
func (*recordMeta) SetGeneration(int64)                           {}
func (*recordMeta) SetSelfLink(string)                            {}
func (*recordMeta) SetCreationTimestamp(metav1.Time)              {}
func (*recordMeta) SetDeletionTimestamp(*metav1.Time)             {}
func (*recordMeta) SetDeletionGracePeriodSeconds(*int64)          {}
func (*recordMeta) SetLabels(map[string]string)                   {}
func (*recordMeta) SetAnnotations(map[string]string)              {}
func (*recordMeta) SetFinalizers([]string)                        {}
func (*recordMeta) SetOwnerReferences([]metav1.OwnerReference)    {}
func (*recordMeta) SetManagedFields([]metav1.ManagedFieldsEntry)  {}

var _ metav1.Object = (*recordMeta)(nil)
