package conformance

// TestConformance runs the upstream Gateway API conformance suite (sigs.k8s.io/gateway-api/conformance) against
// admitpilot and real Envoy on a real cluster: scripts/conformance starts kube-apiserver and kube-controller-manager
// and `admitpilot serve --kube --provision-gateways`, then this test, which plays the kubelet and a cloud's load
// balancer (kubelet.go): it runs the Pods the controller-manager makes, the suite's backends and the gateways
// admitpilot provisions alike, and runs the suite unchanged.
//
// Environment: KUBECONFIG (the API server), ADMITPILOT_ENVOY (Envoy binary), ECHO_BASIC (the suite's echo server
// binary), COREDNS (CoreDNS, for the base manifests' DNS server), CONFORMANCE_WORK (a folder for logs),
// CONFORMANCE_REPORT (where the report goes), CONFORMANCE_PROFILES (comma-separated), CONFORMANCE_RUN_TEST (one
// test only, optional), CONFORMANCE_ONLY (comma-separated tests: every other one is skipped, optional),
// CONFORMANCE_VERSION (admitpilot's version for the report).

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/apis/v1alpha2"
	"sigs.k8s.io/gateway-api/apis/v1alpha3"
	"sigs.k8s.io/gateway-api/apis/v1beta1"
	xv1alpha1 "sigs.k8s.io/gateway-api/apisx/v1alpha1"
	"sigs.k8s.io/gateway-api/conformance"
	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	"sigs.k8s.io/gateway-api/conformance/tests"
	conformanceconfig "sigs.k8s.io/gateway-api/conformance/utils/config"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/gateway-api/pkg/features"
)

// gatewayClassName is the GatewayClass the suite uses, of admitpilot's controller.
const gatewayClassName = "admitpilot"

// controllerName is admitpilot's default GatewayClass controllerName.
const controllerName = "admitpilot.io/gateway-controller"

func env(t *testing.T, name string) string {
	value := os.Getenv(name)
	if value == "" {
		t.Fatalf("%s is not set (run scripts/conformance)", name)
	}
	return value
}

func TestConformance(t *testing.T) {
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stdout), zap.UseDevMode(true)))
	workDir := env(t, "CONFORMANCE_WORK")
	cfg, err := clientcmd.BuildConfigFromFlags("", env(t, "KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	for _, install := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, gatewayv1.Install, v1beta1.Install,
		v1alpha2.Install, v1alpha3.Install, xv1alpha1.Install,
	} {
		if err := install(scheme); err != nil {
			t.Fatal(err)
		}
	}
	// The suite's clients: client-go's default of 5 requests/s starves its many pollers; pod logs come from the
	// harness (logs.go).
	cfg.QPS, cfg.Burst = 100, 200
	cfg.WrapTransport = func(next http.RoundTripper) http.RoundTripper { return podLogs{next: next, workDir: workDir} }
	clientOptions := client.Options{Scheme: scheme}
	c, err := client.New(cfg, clientOptions)
	if err != nil {
		t.Fatal(err)
	}
	// The harness's own, unthrottled.
	harnessCfg := rest.CopyConfig(cfg)
	harnessCfg.QPS = -1
	harnessClient, err := client.New(harnessCfg, clientOptions)
	if err != nil {
		t.Fatal(err)
	}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	if err := setUpBridge(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tearDownBridge)

	ctx, cancel := context.WithCancel(context.Background())
	class := &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: gatewayClassName},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: controllerName},
	}
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	pods := &kubelet{
		client: harnessClient, workDir: workDir, logf: t.Logf,
		bins:    programs{echo: env(t, "ECHO_BASIC"), coredns: env(t, "COREDNS"), envoy: env(t, "ADMITPILOT_ENVOY")},
		pods:    map[types.UID]*runningPod{},
		skipped: map[types.UID]bool{},
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for ctx.Err() == nil {
			if err := pods.reconcile(ctx); err != nil && ctx.Err() == nil {
				t.Logf("harness: %v", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	// After the suite's parallel tests too (they run once this function has returned), and after the report.
	t.Cleanup(func() {
		cancel()
		<-stopped
		pods.stopAll()
		for _, failure := range pods.failures {
			t.Errorf("harness: %s", failure)
		}
	})

	var profiles []suite.ConformanceProfileName
	for _, name := range strings.Split(env(t, "CONFORMANCE_PROFILES"), ",") {
		profiles = append(profiles, suite.ConformanceProfileName(name))
	}
	opts := suite.ConformanceOptions{
		ConfigurableOptions: suite.ConfigurableOptions{
			GatewayClassName: gatewayClassName,
			// Every run gets a fresh etcd: the base namespaces are not worth the time deleting.
			CleanupBaseResources: false,
			CleanupTestResources: true,
			Mode:                 "default",
			TimeoutConfig:        conformanceconfig.DefaultTimeoutConfig(),
			ConformanceProfiles:  profiles,
			SupportedFeatures:    supportedFeatures(os.Getenv("CONFORMANCE_CHANNEL")),
			RunTest:              os.Getenv("CONFORMANCE_RUN_TEST"),
			// In the harness's load-balancer pool (lbPool, kubelet.go; admitpilot's --gateway-address-pool), and not.
			UsableNetworkAddresses:   []gatewayv1.GatewaySpecAddress{{Type: ptrTo(gatewayv1.IPAddressType), Value: "10.244.250.10"}},
			UnusableNetworkAddresses: []gatewayv1.GatewaySpecAddress{{Type: ptrTo(gatewayv1.IPAddressType), Value: "192.0.2.200"}},
			ReportOutputPath:         os.Getenv("CONFORMANCE_REPORT"),
			Implementation: confv1.Implementation{
				Organization: "admitpilot",
				Project:      "admitpilot",
				URL:          "https://github.com/admitpilot/admitpilot",
				Version:      os.Getenv("CONFORMANCE_VERSION"),
				Contact:      []string{"@admitpilot/maintainers"},
			},
		},
		Client:        c,
		ClientOptions: clientOptions,
		Clientset:     clientset,
		RestConfig:    cfg,
	}
	if only := os.Getenv("CONFORMANCE_ONLY"); only != "" {
		opts.SkipTests = allBut(strings.Split(only, ","))
	}
	conformance.RunConformanceWithOptions(t, opts)
}

// ptrTo is a pointer to a copy of v.
func ptrTo[T any](v T) *T { return &v }

// allBut names every conformance test but those named (a subset run: the others are skipped).
func allBut(names []string) []string {
	keep := map[string]bool{}
	for _, name := range names {
		keep[name] = true
	}
	var skip []string
	for _, test := range tests.ConformanceTests {
		if !keep[test.ShortName] {
			skip = append(skip, test.ShortName)
		}
	}
	return skip
}

// supportedFeatures are the features admitpilot claims on `channel` (the CRDs the suite runs on): the core features
// of its profiles and the extended ones it implements (README "Gateway API conformance"; GatewayInfrastructure,
// GatewayStaticAddresses and GatewayAddressEmpty through gateway provisioning; GatewayBackendClientCertificate; h2c
// and WebSocket backends, destination port matching, backend request header modification, CORS, HTTP listener
// isolation, 421 for misdirected HTTPS requests, client certificate validation); on the experimental channel also TCPRoute and HTTPRoute
// retries (the standard channel's HTTPRoute has no `retry` field, and no TCPRoute).
func supportedFeatures(channel string) []features.FeatureName {
	claimed := []features.FeatureName{
		features.SupportGateway,
		features.SupportGatewayPort8080,
		features.SupportGatewayInfrastructure,
		features.SupportGatewayStaticAddresses,
		features.SupportGatewayAddressEmpty,
		features.SupportHTTPRoute,
		features.SupportHTTPRouteQueryParamMatching,
		features.SupportHTTPRouteMethodMatching,
		features.SupportHTTPRouteResponseHeaderModification,
		features.SupportHTTPRoutePortRedirect,
		features.SupportHTTPRouteSchemeRedirect,
		features.SupportHTTPRoutePathRedirect,
		features.SupportHTTPRouteHostRewrite,
		features.SupportHTTPRoutePathRewrite,
		features.SupportHTTPRoute303RedirectStatusCode,
		features.SupportHTTPRoute307RedirectStatusCode,
		features.SupportHTTPRoute308RedirectStatusCode,
		features.SupportHTTPRouteRequestMirror,
		features.SupportHTTPRouteRequestMultipleMirrors,
		features.SupportHTTPRouteRequestPercentageMirror,
		features.SupportHTTPRouteRequestTimeout,
		features.SupportHTTPRouteBackendTimeout,
		features.SupportHTTPRouteParentRefPort,
		features.SupportHTTPRouteNamedRouteRule,
		features.SupportReferenceGrant,
		features.SupportTLSRoute,
		features.SupportTLSRouteModeTerminate,
		features.SupportTLSRouteModeMixed,
		features.SupportGRPCRoute,
		features.SupportGRPCRouteNamedRouteRule,
		features.SupportBackendTLSPolicy,
		features.SupportBackendTLSPolicySANValidation,
		features.SupportGatewayBackendClientCertificate,
		features.SupportHTTPRouteBackendProtocolH2C,
		features.SupportHTTPRouteBackendProtocolWebSocket,
		features.SupportHTTPRouteDestinationPortMatching,
		features.SupportHTTPRouteBackendRequestHeaderModification,
		features.SupportHTTPRouteCORS,
		features.SupportGatewayHTTPListenerIsolation,
		features.SupportGatewayHTTPSListenerDetectMisdirectedRequests,
		features.SupportGatewayFrontendClientCertificateValidation,
		features.SupportGatewayFrontendClientCertificateValidationInsecureFallback,
		features.SupportListenerSet,
	}
	if channel == "experimental" {
		claimed = append(claimed,
			features.SupportTCPRoute,
			features.SupportHTTPRouteRetry,
			features.SupportHTTPRouteRetryBackendTimeout,
			features.SupportHTTPRouteRetryConnectionError,
		)
	}
	return claimed
}
