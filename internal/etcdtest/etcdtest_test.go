package etcdtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
)

func get(t *testing.T, cli *clientv3.Client, key string, timeout time.Duration) (*clientv3.GetResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return cli.Get(ctx, key)
}

func TestServer(t *testing.T) {
	s := Start(t, Options{})
	cli := s.Client()
	defer cli.Close()

	t.Run("put and get", func(t *testing.T) {
		rev := s.Put("/a", []byte("1"))
		resp, err := get(t, cli, "/a", RequestTimeout)
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "1" || resp.Kvs[0].ModRevision != rev {
			t.Fatalf("get /a: %v %+v", err, resp)
		}
	})

	t.Run("kill and restart keep endpoint and data", func(t *testing.T) {
		s.Kill()
		if _, err := get(t, cli, "/a", 500*time.Millisecond); err == nil {
			t.Fatal("etcd answers after Kill")
		}
		s.Restart()
		resp, err := get(t, cli, "/a", RequestTimeout)
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "1" {
			t.Fatalf("after restart: %v %+v", err, resp)
		}
	})

	t.Run("compaction", func(t *testing.T) {
		before := s.Put("/b", []byte("1"))
		s.Put("/b", []byte("2"))
		rev := s.Compact()
		if rev <= before {
			t.Fatalf("compacted at %d, before %d", rev, before)
		}
		ctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
		defer cancel()
		resp := <-cli.Watch(ctx, "/b", clientv3.WithRev(before))
		if !errors.Is(resp.Err(), rpctypes.ErrCompacted) || resp.CompactRevision != rev {
			t.Fatalf("watch from a compacted revision: err %v, compact revision %d", resp.Err(), resp.CompactRevision)
		}
	})

	t.Run("proxy cut and restore", func(t *testing.T) {
		p := s.Proxy()
		pc, err := clientv3.New(clientv3.Config{Endpoints: []string{p.Endpoint}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		if _, err := get(t, pc, "/a", RequestTimeout); err != nil {
			t.Fatalf("through the proxy: %v", err)
		}
		p.Cut()
		if _, err := get(t, pc, "/a", 500*time.Millisecond); err == nil {
			t.Fatal("a read went through a cut proxy")
		}
		p.Restore()
		if _, err := get(t, pc, "/a", RequestTimeout); err != nil {
			t.Fatalf("after restore: %v", err)
		}
		p.Stall()
		if _, err := get(t, pc, "/a", 500*time.Millisecond); err == nil {
			t.Fatal("a read went through a stalled proxy")
		}
		p.Restore()
		if _, err := get(t, pc, "/a", RequestTimeout); err != nil {
			t.Fatalf("after a stall: %v", err)
		}
	})

	t.Run("objects encoded as the API server does", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "services", Namespace: "lb", ResourceVersion: "9"}, Data: map[string]string{"k": "v"}}
		rev := s.PutObject("/registry", cm, Protobuf)
		resp, err := get(t, cli, "/registry/configmaps/lb/services", RequestTimeout)
		if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].ModRevision != rev {
			t.Fatalf("get: %v %+v", err, resp)
		}
		value := resp.Kvs[0].Value
		if !bytes.HasPrefix(value, []byte("k8s\x00")) {
			t.Fatalf("no protobuf magic: %q", value[:8])
		}
		js, err := Encode(cm, JSON)
		if err != nil || js[0] != '{' {
			t.Fatalf("JSON: %v %q", err, js)
		}
		for _, v := range [][]byte{value, js} {
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(v, nil, nil)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			got := obj.(*corev1.ConfigMap)
			if got.Data["k"] != "v" || got.ResourceVersion != "" || got.UID == "" {
				t.Fatalf("decoded %+v", got)
			}
		}
	})
}

func TestTLSAndAuth(t *testing.T) {
	s := Start(t, Options{TLS: true})
	s.Put("/registry/pods/web/a", []byte("x"))
	s.Put("/registry/secrets/other/b", []byte("y"))

	t.Run("a client without a certificate is refused", func(t *testing.T) {
		pool := s.ClientTLS().RootCAs
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint}, DialTimeout: time.Second,
			TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, Logger: zap.NewNop()})
		if err == nil {
			defer cli.Close()
			_, err = get(t, cli, "/registry/pods/web/a", time.Second)
		}
		if err == nil {
			t.Fatal("read without a client certificate")
		}
	})

	t.Run("read-only role for the certificate's user", func(t *testing.T) {
		s.EnableAuth("rootpw", ClientCommonName, "", "/registry/pods/")
		cli := s.Client() // the client certificate: user haproxy-sidecar
		defer cli.Close()
		resp, err := get(t, cli, "/registry/pods/web/a", RequestTimeout)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("read inside the granted prefix: %v %+v", err, resp)
		}
		if _, err := get(t, cli, "/registry/secrets/other/b", RequestTimeout); !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Fatalf("read outside the granted prefix: %v, want permission denied", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
		defer cancel()
		if _, err := cli.Put(ctx, "/registry/pods/web/a", "z"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Fatalf("write: %v, want permission denied", err)
		}
		s.Put("/registry/pods/web/a", []byte("by root"))
	})
}
