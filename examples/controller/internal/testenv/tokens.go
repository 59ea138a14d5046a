package testenv

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// ServiceAccountToken creates the ServiceAccount namespace/name (and its
// namespace, if missing), binds it to each of clusterRoles with a
// ClusterRoleBinding named after it and the role, and returns a token for
// it from the TokenRequest API, as a pod's projected token is. It returns
// once the API server authenticates the token (a TokenReview) and
// authorizes the ServiceAccount every non-resource URL the roles grant (a
// SubjectAccessReview per URL and verb): a server that delegates to the API
// server and caches its answers, as controller-runtime's metrics filter
// does, would otherwise keep a refusal made before the API server's caches
// caught up. It asks every 50 ms until ctx ends.
func (e *Env) ServiceAccountToken(ctx context.Context, namespace, name string, clusterRoles ...string) (string, error) {
	c := e.client
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	if _, err := c.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	user := "system:serviceaccount:" + namespace + ":" + name
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
	var reviews []authorizationv1.NonResourceAttributes
	for _, role := range clusterRoles {
		r, err := c.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: namespace + "-" + name + "-" + role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: namespace}},
		}, metav1.CreateOptions{}); err != nil {
			return "", err
		}
		for _, rule := range r.Rules {
			for _, url := range rule.NonResourceURLs {
				for _, verb := range rule.Verbs {
					reviews = append(reviews, authorizationv1.NonResourceAttributes{Path: url, Verb: verb})
				}
			}
		}
	}
	for _, attrs := range reviews {
		err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
			r, err := c.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user, Groups: groups, NonResourceAttributes: &attrs,
			}}, metav1.CreateOptions{})
			return err == nil && r.Status.Allowed, err
		})
		if err != nil {
			return "", fmt.Errorf("testenv: waiting for %s to be allowed %s %s: %w", user, attrs.Verb, attrs.Path, err)
		}
	}
	tr, err := c.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	token := tr.Status.Token
	err = wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		r, err := c.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		return err == nil && r.Status.Authenticated && r.Status.User.Username == user, err
	})
	if err != nil {
		return "", fmt.Errorf("testenv: waiting for the token of %s to be authenticated: %w", user, err)
	}
	return token, nil
}
