package objstatus

import (
	"net"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Address is one published address: an IP, or a host name.
type Address struct {
	IP, Hostname string
}

// Addresses reads --publish-address's values: IPs, the rest host names.
func Addresses(values []string) []Address {
	var out []Address
	for _, v := range values {
		if net.ParseIP(v) != nil {
			out = append(out, Address{IP: v})
		} else {
			out = append(out, Address{Hostname: v})
		}
	}
	return out
}

// ServiceAddresses are the addresses a Service is reached at from outside: its load balancer's
// (status.loadBalancer.ingress), else its external IPs; none for a Service that has neither yet
// (a load balancer still being made, a ClusterIP Service).
func ServiceAddresses(svc *corev1.Service) []Address {
	var out []Address
	for _, in := range svc.Status.LoadBalancer.Ingress {
		switch {
		case in.IP != "":
			out = append(out, Address{IP: in.IP})
		case in.Hostname != "":
			out = append(out, Address{Hostname: in.Hostname})
		}
	}
	if len(out) == 0 {
		for _, ip := range svc.Spec.ExternalIPs {
			out = append(out, Address{IP: ip})
		}
	}
	return slices.Compact(out)
}
