// Command dispatch-crd-apiserver runs Kubernetes' apiextensions-apiserver (CustomResourceDefinitions and the
// custom resources they define) on its own, for the dispatch project's tests. Upstream, that server sits behind
// kube-apiserver's aggregator, which serves discovery and the core resources; here it is the only Go server, and
// the project's own Python server fronts it for the core resources. Compared with the upstream main this one:
//   - switches root discovery (/api, /apis) back on: the aggregator normally serves it;
//   - hands the generic server an empty core informer factory, so that readiness does not wait forever for
//     informers of core resources (Services, Namespaces) that no server here provides;
//   - publishes OpenAPI v2 as well as v3, so that kubectl can validate and explain custom resources;
//   - refuses requests without credentials (401): upstream lets them in as system:anonymous and asks the
//     (absent) kube-apiserver whether that user may act, which fails as a 500.
// Everything else (flags, storage, authentication, validation, pruning, defaulting, server-side apply, watch) is
// the upstream code as Debian packages it. Build: scripts/k8s/build.sh.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/spf13/cobra"

	"k8s.io/apiextensions-apiserver/pkg/apiserver"
	"k8s.io/apiextensions-apiserver/pkg/cmd/server/options"
	generatedopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/util/openapi"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/component-base/cli"
)

func run(ctx context.Context, o *options.CustomResourceDefinitionsServerOptions) error {
	config, err := o.Config()
	if err != nil {
		return err
	}
	generic := config.GenericConfig
	// The delegating authentication options always add the anonymous authenticator; take its answer back.
	authn := generic.Authentication.Authenticator
	generic.Authentication.Authenticator = authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
		resp, ok, err := authn.AuthenticateRequest(r)
		if ok && resp.User.GetName() == user.Anonymous {
			return nil, false, nil
		}
		return resp, ok, err
	})
	defs := openapi.GetOpenAPIDefinitionsWithoutDisabledFeatures(generatedopenapi.GetOpenAPIDefinitions)
	generic.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(defs, openapinamer.NewDefinitionNamer(apiserver.Scheme, scheme.Scheme))
	generic.OpenAPIConfig.Info.Title = "dispatch-crd-apiserver"
	// The options wired admission and the service resolver to the informer factory they made; that one is
	// never started. The generic server gets this empty one, whose readiness has nothing to wait for.
	core, err := kubernetes.NewForConfig(generic.LoopbackClientConfig)
	if err != nil {
		return err
	}
	generic.SharedInformerFactory = informers.NewSharedInformerFactory(core, 0)

	completed := config.Complete()
	completed.GenericConfig.EnableDiscovery = true
	server, err := completed.New(genericapiserver.NewEmptyDelegate())
	if err != nil {
		return err
	}
	return server.GenericAPIServer.PrepareRun().RunWithContext(ctx)
}

func main() {
	o := options.NewCustomResourceDefinitionsServerOptions(os.Stdout, os.Stderr)
	cmd := &cobra.Command{
		Use:   "dispatch-crd-apiserver",
		Short: "apiextensions-apiserver serving alone (custom resources only), for tests",
		PersistentPreRunE: func(*cobra.Command, []string) error {
			return o.ServerRunOptions.ComponentGlobalsRegistry.Set()
		},
		RunE: func(c *cobra.Command, _ []string) error {
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return fmt.Errorf("invalid flags: %w", err)
			}
			return run(c.Context(), o)
		},
	}
	cmd.SetContext(genericapiserver.SetupSignalContext())
	o.AddFlags(cmd.Flags())
	os.Exit(cli.Run(cmd))
}
