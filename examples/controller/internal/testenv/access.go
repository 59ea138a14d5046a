package testenv

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// WaitForAccess waits until the user of cfg (for example an
// [Env.ImpersonatedConfig]) is allowed attrs, as the user's own
// SelfSubjectAccessReview says. RBAC changes reach the authorizer through a
// watch inside the API server, a moment after the write returns: a
// controller started right after [Env.ApplyManifests] may otherwise see its
// first list forbidden and back off. The authorizer offers nothing to watch,
// so WaitForAccess asks again every 50 ms until ctx ends.
func WaitForAccess(ctx context.Context, cfg *rest.Config, attrs authorizationv1.ResourceAttributes) error {
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	review := &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs},
	}
	var last string
	err = wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		got, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		last = got.Status.Reason
		return got.Status.Allowed, nil
	})
	if err != nil {
		user := cfg.Impersonate.UserName
		if user == "" {
			user = "the config's user"
		}
		return fmt.Errorf("testenv: waiting for %s to be allowed %+v (last reason %q): %w", user, attrs, last, err)
	}
	return nil
}
