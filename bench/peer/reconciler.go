package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

var oidcClientKind = schema.GroupVersionKind{Group: "nauthera.io", Version: "v1alpha1", Kind: "OIDCClient"}

// The finalizer the reconciler puts on the manifests it registers.
const finalizer = "nauthera.io/finalizer"

func newLogger() logr.Logger {
	return zap.New(zap.UseDevMode(false))
}

// serverWrite is the last write the server reported for one client.
type serverWrite struct {
	revision string
	manager  string
	actor    string
}

// serverRevisions holds, per manifest, the server's last reported write and the revision this
// controller wrote last (its status may lag in the informer's cache).
type serverRevisions struct {
	mu      sync.Mutex
	server  map[types.NamespacedName]serverWrite
	written map[types.UID]writtenRevision
}

type writtenRevision struct {
	generation int64
	revision   string
}

func newServerRevisions() *serverRevisions {
	return &serverRevisions{server: map[types.NamespacedName]serverWrite{}, written: map[types.UID]writtenRevision{}}
}

func (s *serverRevisions) reported(key types.NamespacedName, write serverWrite) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.server[key] = write
}

func (s *serverRevisions) lastReported(key types.NamespacedName) (serverWrite, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.server[key]
	return w, ok
}

func (s *serverRevisions) wrote(uid types.UID, generation int64, revision string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.written[uid] = writtenRevision{generation: generation, revision: revision}
}

func (s *serverRevisions) lastWritten(uid types.UID) (writtenRevision, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.written[uid]
	return w, ok
}

func (s *serverRevisions) forget(key types.NamespacedName, uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.server, key)
	delete(s.written, uid)
}

// clientReconciler registers OIDCClients with the server and delivers their generated secrets.
type clientReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder recorder.EventRecorder
	Admin    *adminClient
	Manager  string
	Server   *serverRevisions
}

func (r *clientReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := newOIDCClient()
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	statusRevision, _, _ := unstructured.NestedString(obj.Object, "status", "revision")

	if !obj.GetDeletionTimestamp().IsZero() {
		if !controllerutil.ContainsFinalizer(obj, finalizer) {
			return ctrl.Result{}, nil
		}
		if err := r.deleteOnServer(ctx, obj, statusRevision); err != nil {
			return ctrl.Result{}, err
		}
		patch := client.MergeFrom(obj.DeepCopy())
		controllerutil.RemoveFinalizer(obj, finalizer)
		if err := r.Patch(ctx, obj, patch); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		r.Server.forget(req.NamespacedName, obj.GetUID())
		return ctrl.Result{}, nil
	}

	if before := obj.DeepCopy(); controllerutil.AddFinalizer(obj, finalizer) {
		if err := r.Patch(ctx, obj, client.MergeFrom(before)); err != nil {
			return ctrl.Result{}, err
		}
	}

	generation := obj.GetGeneration()
	observed, _, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
	registered := statusRevision != "" && observed == generation
	if written, ok := r.Server.lastWritten(obj.GetUID()); ok && written.generation == generation {
		// This generation is registered; the cache has not shown the status patch yet.
		registered, statusRevision = true, written.revision
	}
	if !registered {
		return r.register(ctx, obj, statusRevision)
	}
	if write, ok := r.Server.lastReported(req.NamespacedName); ok &&
		write.revision != statusRevision && write.manager != r.Manager && phase != "Error" {
		return r.markDrifted(ctx, obj, write)
	}
	return ctrl.Result{}, nil
}

func (r *clientReconciler) objectRef(obj *unstructured.Unstructured, m protoreflect.Message) {
	issuer, _, _ := unstructured.NestedString(obj.Object, "spec", "issuer")
	setString(m, "issuer", issuer)
	setString(m, "namespace", obj.GetNamespace())
	setString(m, "name", obj.GetName())
}

func (r *clientReconciler) register(ctx context.Context, obj *unstructured.Unstructured, lastRevision string) (ctrl.Result, error) {
	request := r.Admin.message("ApplyClientRequest")
	r.objectRef(obj, child(request, "ref"))
	spec := child(request, "spec")
	text := func(path ...string) string {
		v, _, _ := unstructured.NestedString(obj.Object, append([]string{"spec"}, path...)...)
		return v
	}
	list := func(name string) []string {
		v, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", name)
		return v
	}
	setString(spec, "display_name", text("displayName"))
	setStrings(spec, "redirect_uris", list("redirectUris"))
	setStrings(spec, "post_logout_redirect_uris", list("postLogoutRedirectUris"))
	setStrings(spec, "grant_types", list("grantTypes"))
	setStrings(spec, "response_types", list("responseTypes"))
	setStrings(spec, "scopes", list("scopes"))
	setString(spec, "token_endpoint_auth_method", text("tokenEndpointAuthMethod"))
	pkce, _, _ := unstructured.NestedBool(obj.Object, "spec", "requirePkce")
	setBool(spec, "require_pkce", pkce)
	generate, _, _ := unstructured.NestedBool(obj.Object, "spec", "secret", "generate")
	if generate {
		setBool(spec, "generate_secret", true)
	}
	setString(spec, "branding_ref", text("brandingRef", "name"))
	setInt64(request, "generation", obj.GetGeneration())
	setString(request, "manager", r.Manager)
	precondition := child(request, "if_revision")
	if lastRevision != "" {
		setString(precondition, "revision", lastRevision)
	} else {
		setBool(precondition, "absent", true)
	}

	response, err := r.Admin.call(ctx, "ApplyClient", request, "ApplyClientResponse")
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("ApplyClient: %w", err)
	}
	held := getMessage(response, "client")
	revision := getString(held, "revision")
	clientID := getString(held, "client_id")
	r.Server.wrote(obj.GetUID(), obj.GetGeneration(), revision)

	secretName := text("secret", "secretName")
	if secretName == "" {
		secretName = obj.GetName()
	}
	if secret := getString(response, "secret"); secret != "" {
		if err := r.deliverSecret(ctx, obj, secretName, clientID, secret); err != nil {
			return ctrl.Result{}, err
		}
	}

	now := metav1.Now().UTC().Format(time.RFC3339)
	patch := client.MergeFrom(obj.DeepCopy())
	message := fmt.Sprintf("generation %d is in force", obj.GetGeneration())
	_ = unstructured.SetNestedMap(obj.Object, map[string]any{
		"observedGeneration": obj.GetGeneration(),
		"phase":              "Registered",
		"reason":             "Registered",
		"revision":           revision,
		"generationInForce":  getInt64(held, "generation_in_force"),
		"clientId":           clientID,
		"secretRef":          map[string]any{"name": secretName},
		"lastAttemptTime":    now,
		"conditions": []any{map[string]any{
			"type": "Ready", "status": "True", "reason": "Registered", "message": message,
			"observedGeneration": obj.GetGeneration(), "lastTransitionTime": now,
		}},
	}, "status")
	if err := r.Status().Patch(ctx, obj, patch); err != nil {
		return ctrl.Result{}, err
	}
	r.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, "Registered", "Register", "%s", message)
	return ctrl.Result{}, nil
}

// deliverSecret creates the client's Secret, owned by the manifest, with the generated secret.
func (r *clientReconciler) deliverSecret(ctx context.Context, obj *unstructured.Unstructured, name, clientID, secret string) error {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: obj.GetNamespace()},
	}
	_, err := controllerutil.CreateOrPatch(ctx, r.Client, s, func() error {
		s.Data = map[string][]byte{"clientId": []byte(clientID), "clientSecret": []byte(secret)}
		return controllerutil.SetControllerReference(obj, s, r.Scheme)
	})
	if err != nil {
		return fmt.Errorf("delivering the Secret %s/%s: %w", obj.GetNamespace(), name, err)
	}
	return nil
}

// markDrifted reads what the server holds and shows the fields another writer changed.
func (r *clientReconciler) markDrifted(ctx context.Context, obj *unstructured.Unstructured, write serverWrite) (ctrl.Result, error) {
	request := r.Admin.message("GetClientRequest")
	r.objectRef(obj, child(request, "ref"))
	held, err := r.Admin.call(ctx, "GetClient", request, "Client")
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("GetClient: %w", err)
	}
	statusRevision, _, _ := unstructured.NestedString(obj.Object, "status", "revision")
	revision := getString(held, "revision")
	if revision == statusRevision {
		return ctrl.Result{}, nil
	}
	fields := changedFields(obj, getMessage(held, "spec"))
	now := metav1.Now().UTC().Format(time.RFC3339)
	patch := client.MergeFrom(obj.DeepCopy())
	message := fmt.Sprintf("the server holds revision %s written by %s, not the declared one", revision, write.actor)
	drift := map[string]any{"serverRevision": revision, "detectedAt": now, "fields": toAny(fields)}
	if write.actor != "" {
		drift["actor"] = write.actor
	}
	_ = unstructured.SetNestedField(obj.Object, "Error", "status", "phase")
	_ = unstructured.SetNestedField(obj.Object, "Drifted", "status", "reason")
	_ = unstructured.SetNestedMap(obj.Object, drift, "status", "drift")
	_ = unstructured.SetNestedSlice(obj.Object, []any{map[string]any{
		"type": "Ready", "status": "False", "reason": "Drifted", "message": message,
		"observedGeneration": obj.GetGeneration(), "lastTransitionTime": now,
	}}, "status", "conditions")
	if err := r.Status().Patch(ctx, obj, patch); err != nil {
		return ctrl.Result{}, err
	}
	r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, "Drifted", "Compare", "%s", message)
	return ctrl.Result{}, nil
}

func changedFields(obj *unstructured.Unstructured, held protoreflect.Message) []string {
	var fields []string
	text := func(name, proto, path string) {
		v, _, _ := unstructured.NestedString(obj.Object, "spec", name)
		if v != getString(held, proto) {
			fields = append(fields, path)
		}
	}
	list := func(name, proto, path string) {
		v, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", name)
		got := getStrings(held, proto)
		slices.Sort(v)
		slices.Sort(got)
		if !slices.Equal(v, got) {
			fields = append(fields, path)
		}
	}
	text("displayName", "display_name", "spec.displayName")
	list("redirectUris", "redirect_uris", "spec.redirectUris")
	list("postLogoutRedirectUris", "post_logout_redirect_uris", "spec.postLogoutRedirectUris")
	list("grantTypes", "grant_types", "spec.grantTypes")
	list("responseTypes", "response_types", "spec.responseTypes")
	list("scopes", "scopes", "spec.scopes")
	text("tokenEndpointAuthMethod", "token_endpoint_auth_method", "spec.tokenEndpointAuthMethod")
	return fields
}

func toAny(values []string) []any {
	out := make([]any, len(values))
	for i, v := range values {
		out[i] = v
	}
	return out
}

// deleteOnServer deletes the client while the server holds the revision last written; a client
// the server no longer holds is gone already.
func (r *clientReconciler) deleteOnServer(ctx context.Context, obj *unstructured.Unstructured, lastRevision string) error {
	request := r.Admin.message("DeleteClientRequest")
	r.objectRef(obj, child(request, "ref"))
	if lastRevision != "" {
		setString(child(request, "if_revision"), "revision", lastRevision)
	}
	setString(request, "manager", r.Manager)
	if _, err := r.Admin.call(ctx, "DeleteClient", request, "DeleteClientResponse"); err != nil {
		if status.Code(err) == codes.NotFound {
			return nil
		}
		return fmt.Errorf("DeleteClient: %w", err)
	}
	return nil
}
