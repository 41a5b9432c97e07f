package config

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"regexp"
	"strings"
)

// DefaultControllerName is --status-controller-name's default: the controllerName of the
// Gateway API route status the sidecar writes.
const DefaultControllerName = "haproxy-sidecar.io/controller"

// Publish is the status the sidecar writes on the Kubernetes objects its live configuration
// serves (--source=kube; package objstatus): the address published on Ingresses and Gateways,
// and the controller name of the Gateway API route status.
type Publish struct {
	// Service is NAMESPACE/NAME of the Service whose load-balancer address is published
	// ("": none).
	Service string
	// Addresses are published instead: IPs or host names.
	Addresses List
	// ControllerName names the sidecar in the Gateway API routes' status.parents.
	ControllerName string
}

func (*Publish) title() string { return "Status on the objects served (--source=kube)" }

func (p *Publish) register(fs *flag.FlagSet) {
	fs.StringVar(&p.Service, "publish-service", "", "`NAMESPACE/NAME` of the Service whose load-balancer address (status.loadBalancer.ingress, else spec.externalIPs) is written on the Ingresses' status and the Gateways' status.addresses the live configuration declares it serves (docs/status.md; needs get on that Service)")
	fs.Var(&p.Addresses, "publish-address", "`ADDRESS` (an IP or a host name) written on the Ingresses and Gateways the live configuration declares it serves, instead of --publish-service's (repeatable, or comma-separated)")
	fs.StringVar(&p.ControllerName, "status-controller-name", DefaultControllerName, "the controllerName of the Gateway API route status the sidecar writes (DOMAIN/PATH): entries of other controllers are left alone")
}

// controllerName is the Gateway API's GatewayController pattern.
var controllerName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$`)

// dnsName is an RFC 1123 host name, as Kubernetes validates them.
var dnsName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

func (p *Publish) validate() error {
	var errs []error
	if p.Service != "" {
		ns, name, ok := strings.Cut(p.Service, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			errs = append(errs, fmt.Errorf("--publish-service %q: want NAMESPACE/NAME", p.Service))
		}
	}
	if p.Service != "" && len(p.Addresses) > 0 {
		errs = append(errs, errors.New("--publish-service and --publish-address exclude each other: publish the Service's address or the ones given"))
	}
	for _, a := range p.Addresses {
		if net.ParseIP(a) == nil && (len(a) > 253 || !dnsName.MatchString(a)) {
			errs = append(errs, fmt.Errorf("--publish-address %q: want an IP address or a host name (lower case, RFC 1123)", a))
		}
	}
	if len(p.ControllerName) > 253 || !controllerName.MatchString(p.ControllerName) {
		errs = append(errs, fmt.Errorf("--status-controller-name %q: want DOMAIN/PATH, such as %s", p.ControllerName, DefaultControllerName))
	}
	return errors.Join(errs...)
}

// Set reports whether an address is to be published.
func (p *Publish) Set() bool { return p.Service != "" || len(p.Addresses) > 0 }
