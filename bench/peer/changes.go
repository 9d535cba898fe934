package main

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/dynamicpb"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The kind of a ChangeEvent that names a client (ObjectKind OBJECT_KIND_CLIENT).
const objectKindClient = 1

// changeFeed turns the server's WatchChanges stream into requests for the manifest each change
// names (a source.Channel); when the server asks for a resync, every cached manifest is requeued.
type changeFeed struct {
	admin  *adminClient
	server *serverRevisions
	out    chan<- event.GenericEvent
	cache  cache.Cache
}

// NeedLeaderElection: only the leader reconciles, so only it needs the changes.
func (f *changeFeed) NeedLeaderElection() bool { return true }

func (f *changeFeed) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("changes")
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := f.admin.watch(ctx, func(e *dynamicpb.Message) {
			backoff = 100 * time.Millisecond
			f.seen(ctx, e)
		})
		if ctx.Err() != nil {
			break
		}
		logger.Info("the change stream ended; reopening", "error", err.Error(), "after", backoff.String())
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
		// Changes made while the stream was down are not replayed from an empty hint.
		f.requeueAll(ctx)
	}
	return nil
}

func (f *changeFeed) seen(ctx context.Context, e *dynamicpb.Message) {
	if e.Get(field(e, "resync_required")).Bool() {
		f.requeueAll(ctx)
		return
	}
	if int64(e.Get(field(e, "kind")).Enum()) != objectKindClient {
		return
	}
	ref := getMessage(e, "ref")
	written := getMessage(e, "written")
	key := types.NamespacedName{Namespace: getString(ref, "namespace"), Name: getString(ref, "name")}
	f.server.reported(key, serverWrite{
		revision: getString(e, "revision"),
		manager:  getString(written, "manager"),
		actor:    getString(written, "actor"),
	})
	obj := newOIDCClient()
	obj.SetNamespace(key.Namespace)
	obj.SetName(key.Name)
	select {
	case f.out <- event.GenericEvent{Object: obj}:
	case <-ctx.Done():
	}
}

func (f *changeFeed) requeueAll(ctx context.Context) {
	list := newOIDCClient()
	list.SetKind("OIDCClientList")
	items := &unstructured.UnstructuredList{}
	items.SetGroupVersionKind(list.GroupVersionKind())
	if err := f.cache.List(ctx, items); err != nil {
		return
	}
	for i := range items.Items {
		select {
		case f.out <- event.GenericEvent{Object: &items.Items[i]}:
		case <-ctx.Done():
			return
		}
	}
}
