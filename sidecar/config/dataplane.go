package config

import (
	"errors"
	"flag"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/dataplane"
)

// Dataplane is how to reach remote HAProxy hosts through the HAProxy Data Plane API
// (--reload=dataplane).
type Dataplane struct {
	URLs                   dataplane.URLs
	Username, Password     string
	PasswordFile, Token    string
	CACert, Cert, Key      string
	SPIFFESocket, SPIFFEID string
	SSLDir                 string
	MapsDir, FilesDir      string
	// Mode is what the sidecar manages on the hosts: config (the whole configuration) or
	// servers (the servers of backends of hosts someone else configures).
	Mode string
	// Backends are the backends --dataplane-mode=servers manages (default: every backend
	// section of the rendering).
	Backends List
}

func (*Dataplane) title() string { return "Remote HAProxy hosts (--reload=dataplane)" }

func (d *Dataplane) register(fs *flag.FlagSet) {
	fs.Var(&d.URLs, "dataplane-url", "with --reload=dataplane: a host's Data Plane API, https://lb1:5555/v3 (repeatable or comma-separated; without /v2 or /v3 the version is asked)")
	fs.StringVar(&d.Username, "dataplane-username", "", "Data Plane API basic authentication user")
	fs.StringVar(&d.Password, "dataplane-password", "", "Data Plane API basic authentication password (prefer --dataplane-password-file)")
	fs.StringVar(&d.PasswordFile, "dataplane-password-file", "", "file holding the Data Plane API password, re-read at every request")
	fs.StringVar(&d.Token, "dataplane-token", "", "bearer token for the Data Plane API, instead of basic authentication")
	fs.StringVar(&d.CACert, "dataplane-ca", "", "CA certificate(s) of the Data Plane API servers (default: system roots); re-read when it changes")
	fs.StringVar(&d.Cert, "dataplane-cert", "", "client certificate for mutual TLS with the Data Plane API; re-read when it changes")
	fs.StringVar(&d.Key, "dataplane-key", "", "private key of --dataplane-cert")
	fs.StringVar(&d.SPIFFESocket, "spiffe-socket", "", "SPIFFE Workload API address (unix:///path or a path), used with --dataplane-spiffe-id (default $SPIFFE_ENDPOINT_SOCKET)")
	fs.StringVar(&d.SPIFFEID, "dataplane-spiffe-id", "", "mutual TLS with SPIFFE: the Data Plane API servers' SPIFFE ID, or spiffe://trust.domain to accept its members")
	fs.StringVar(&d.SSLDir, "dataplane-ssl-dir", "", "the hosts' certificate storage directory, which templates see as ssldir (default: learned from the hosts' storage API; /etc/haproxy/ssl, the API's default, until a host stores a certificate)")
	fs.StringVar(&d.MapsDir, "dataplane-maps-dir", "", "the hosts' map storage directory (the API's resources.maps_dir), which templates see as mapsdir (default: the directory the hosts' map storage lists at start; /etc/haproxy/maps, the API's default, when it is empty)")
	fs.StringVar(&d.FilesDir, "dataplane-files-dir", "", "the hosts' general file storage directory (the API's general_storage_dir), which templates see as filesdir (default: the directory the hosts' general storage lists at start; /etc/haproxy/general, the API's default, when it is empty)")
	choiceVar(fs, &d.Mode, "dataplane-mode", "config", []string{"config", "servers"}, "with --reload=dataplane: what the sidecar manages on the hosts: config (the whole configuration, its certificates and files) or servers (only the servers and default-server of backends of hosts someone else configures, through transactions; the rest of their configuration is left as it is)")
	fs.Var(&d.Backends, "dataplane-backends", "with --dataplane-mode=servers: the backends to manage, comma-separated (default: every backend section of the rendering); each must be in the rendering and on the hosts")
}

func (d *Dataplane) validate() error {
	if len(d.Backends) > 0 && d.Mode != "servers" {
		return errors.New("--dataplane-backends needs --dataplane-mode=servers")
	}
	return nil
}
