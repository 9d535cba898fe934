// Command peer registers OIDCClients with nauthera-server the way a controller-runtime operator
// does: a manager, a reconciler for OIDCClients that owns their Secrets, the finalizer helper, an
// event recorder, and the server's WatchChanges stream as a source of requests. It is the
// yardstick `nauthera-bench --peer` measures the reconciler against (docs/performance.md).
//
// It announces itself with one JSON line on stderr, `{"message":"listening","metrics":"ADDR"}`;
// the reconcile counts are controller-runtime's own metrics at http://ADDR/metrics.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

func main() {
	var (
		protoRoot       = flag.String("proto-root", "proto", "the folder holding nauthera/admin/v1/admin.proto")
		serverAddress   = flag.String("server-address", "", "host:port of nauthera-server's AdminService")
		serverName      = flag.String("server-name", "", "the name the server's certificate holds")
		tlsDir          = flag.String("tls-dir", "", "the folder with tls.crt, tls.key and ca.crt")
		manager         = flag.String("manager", "controller-runtime-peer", "the manager named on every server write")
		concurrency     = flag.Int("concurrency", 16, "MaxConcurrentReconciles")
		qps             = flag.Float64("kube-qps", 500, "client-side rate limit of the Kubernetes client (requests per second)")
		burst           = flag.Int("kube-burst", 1000, "client-side burst of the Kubernetes client")
		metricsAddress  = flag.String("metrics-address", "127.0.0.1:0", "where /metrics is served (port 0: any)")
		leaderElect     = flag.Bool("leader-elect", true, "hold a Lease before reconciling, as a deployed operator does")
		leaseNamespace  = flag.String("lease-namespace", "default", "the namespace of the Lease")
		contentType     = flag.String("kube-content-type", "", "the Kubernetes clients' wire format (empty: client-go's default, protobuf for built-in kinds)")
		leaseName       = flag.String("lease-name", "nauthera-peer", "the name of the Lease")
		changeQueueSize = flag.Int("change-buffer", 1024, "server changes buffered before the stream waits")
		namespaces      = flag.String("namespaces", "", "comma-separated namespaces to reconcile (empty: all)")
	)
	flag.Parse()
	ctrl.SetLogger(newLogger())
	log := ctrl.Log.WithName("peer")
	if *serverAddress == "" || *tlsDir == "" || *serverName == "" {
		fail("--server-address, --server-name and --tls-dir are required")
	}

	ctx := ctrl.SetupSignalHandler()
	admin, err := dialAdmin(ctx, *protoRoot, *serverAddress, *serverName, *tlsDir)
	if err != nil {
		fail(err.Error())
	}

	config := ctrl.GetConfigOrDie()
	// client-go's default of 20 requests per second (burst 30) would make the peer wait on
	// itself; a tuned operator raises it to what its API server takes.
	config.QPS = float32(*qps)
	config.Burst = *burst
	if *contentType != "" {
		config.ContentType = *contentType
	}

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		fail(err.Error())
	}
	cacheOptions := cache.Options{}
	if *namespaces != "" {
		cacheOptions.DefaultNamespaces = map[string]cache.Config{}
		for _, namespace := range strings.Split(*namespaces, ",") {
			cacheOptions.DefaultNamespaces[namespace] = cache.Config{}
		}
	}
	mgr, err := ctrl.NewManager(config, ctrl.Options{
		Scheme: scheme,
		Cache:  cacheOptions,
		// Served below on a listener of our own, so that port 0 can be announced.
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		LeaderElection:          *leaderElect,
		LeaderElectionID:        *leaseName,
		LeaderElectionNamespace: *leaseNamespace,
	})
	if err != nil {
		fail(err.Error())
	}

	changes := make(chan event.GenericEvent, *changeQueueSize)
	reconciler := &clientReconciler{
		Client:   mgr.GetClient(),
		Scheme:   mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder("nauthera-peer"),
		Admin:    admin,
		Manager:  *manager,
		Server:   newServerRevisions(),
	}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("oidcclient").
		For(newOIDCClient()).
		Owns(&corev1.Secret{}).
		WatchesRawSource(source.Channel(changes, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: *concurrency}).
		Complete(reconciler)
	if err != nil {
		fail(err.Error())
	}
	if err := mgr.Add(&changeFeed{admin: admin, server: reconciler.Server, out: changes, cache: mgr.GetCache()}); err != nil {
		fail(err.Error())
	}

	listener, err := net.Listen("tcp", *metricsAddress)
	if err != nil {
		fail(err.Error())
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(ctrlmetrics.Registry, promhttp.HandlerOpts{}))
	go func() { _ = http.Serve(listener, mux) }()
	announce(map[string]string{"message": "listening", "metrics": listener.Addr().String()})

	log.Info("starting", "concurrency", *concurrency, "qps", *qps, "burst", *burst)
	if err := mgr.Start(ctx); err != nil {
		fail(err.Error())
	}
}

func newOIDCClient() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(oidcClientKind)
	return u
}

func announce(fields map[string]string) {
	line, _ := json.Marshal(fields)
	fmt.Fprintln(os.Stderr, string(line))
}

func fail(message string) {
	announce(map[string]string{"message": "failed", "error": message, "time": time.Now().UTC().Format(time.RFC3339)})
	os.Exit(1)
}
