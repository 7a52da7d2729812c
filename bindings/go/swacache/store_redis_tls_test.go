package swacache

// The Redis store over TLS with ACL users: a redis-server started here with
// --tls-port and certificates made by the openssl CLI. Skipped (t.Skip with
// the reason) when redis-server, redis-cli or openssl is missing, the
// library has no Redis store, or redis-server was built without TLS.

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func runOpenSSL(t *testing.T, dir string, args ...string) {
	cmd := exec.Command("openssl", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("openssl %v: %v\n%s", args, err, out)
	}
}

func makeTLSFiles(t *testing.T, dir string) {
	ec := []string{"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"}
	for _, ca := range []string{"ca", "otherca"} {
		runOpenSSL(t, dir, append(append([]string{"req", "-x509"}, ec...), "-keyout", ca+".key", "-out",
			ca+".crt", "-days", "3", "-subj", "/CN=swacache go test "+ca)...)
	}
	if err := os.WriteFile(filepath.Join(dir, "server.ext"),
		[]byte("subjectAltName=DNS:redis.test,IP:127.0.0.1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runOpenSSL(t, dir, append(append([]string{"req"}, ec...), "-keyout", "server.key", "-out",
		"server.csr", "-subj", "/CN=redis.test")...)
	runOpenSSL(t, dir, "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
		"-CAcreateserial", "-out", "server.crt", "-days", "3", "-extfile", "server.ext")
}

func TestRedisStoreOverTLSWithACLUsers(t *testing.T) {
	for _, exe := range []string{"redis-server", "redis-cli", "openssl"} {
		if _, err := exec.LookPath(exe); err != nil {
			t.Skipf("%s is not on PATH", exe)
		}
	}
	if _, err := NewRedisStore(RedisStoreConfig{Port: 1, TimeoutMs: 100}); errors.Is(err, ErrUnimplemented) {
		t.Skipf("no Redis store in this build: %v", err)
	}
	dir := t.TempDir()
	makeTLSFiles(t, dir)
	port, tlsPort := freePort(t), freePort(t)
	path := func(f string) string { return filepath.Join(dir, f) }
	var log bytes.Buffer
	server := exec.Command("redis-server", "--port", fmt.Sprint(port), "--tls-port", fmt.Sprint(tlsPort),
		"--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir,
		"--tls-cert-file", path("server.crt"), "--tls-key-file", path("server.key"),
		"--tls-ca-cert-file", path("ca.crt"), "--tls-auth-clients", "no")
	server.Stdout, server.Stderr = &log, &log
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- server.Wait() }()
	defer func() { server.Process.Kill(); <-exited }()
	cli := func(args ...string) string {
		out, _ := exec.Command("redis-cli", append([]string{"-p", fmt.Sprint(port)}, args...)...).Output()
		return strings.TrimSpace(string(out))
	}
	for up := false; !up; {
		select {
		case <-exited:
			exited <- nil
			if strings.Contains(strings.ToLower(log.String()), "tls") {
				t.Skipf("this redis-server has no TLS support: %s", log.String())
			}
			t.Fatalf("redis-server exited: %s", log.String())
		case <-time.After(50 * time.Millisecond):
			up = cli("PING") == "PONG"
		}
	}
	if cli("ACL", "SETUSER", "writer", "on", ">wpw", "~*", "+@all") != "OK" ||
		cli("ACL", "SETUSER", "reader", "on", ">rpw", "~*", "-@all", "+get", "+exists", "+ping") != "OK" {
		t.Fatal("ACL SETUSER failed")
	}
	config := func(user, password string) RedisStoreConfig {
		return RedisStoreConfig{Host: "127.0.0.1", Port: uint32(tlsPort), TimeoutMs: 2000, Password: password,
			Security: RedisSecurity{Username: user, TLS: true, TLSCAFile: path("ca.crt")}}
	}
	wc := config("writer", "wpw")
	wc.Security.TLSServerName = "redis.test"
	writer, err := NewRedisStore(wc)
	if err != nil {
		t.Fatalf("writer: %v", err)
	}
	defer writer.Close()
	reader, err := NewRedisStore(config("reader", "rpw"))
	if err != nil {
		t.Fatalf("reader: %v", err)
	}
	defer reader.Close()
	blob := make([]byte, 300000)
	rand.New(rand.NewSource(5)).Read(blob)
	key := []byte("go-tls\x00key")
	if err := writer.Put(key, blob); err != nil {
		t.Fatal(err)
	}
	if got, err := reader.Get(key); err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("reader Get: %d bytes, %v", len(got), err)
	}
	err = reader.Put(key, []byte("other"))
	if !errors.Is(err, ErrPermissionDenied) || !strings.Contains(err.Error(), "NOPERM") ||
		!strings.Contains(err.Error(), fmt.Sprintf("127.0.0.1:%d", tlsPort)) {
		t.Fatalf("reader Put: %v", err)
	}
	if got, err := reader.Get(key); err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("blob changed by a refused put: %v", err)
	}
	if err := writer.Remove(key); err != nil {
		t.Fatal(err)
	}

	bad := config("writer", "wpw")
	bad.Security.TLSCAFile = path("otherca.crt")
	if _, err := NewRedisStore(bad); !errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), "failed verification") {
		t.Fatalf("wrong CA: %v", err)
	}
	bad = config("writer", "wpw")
	bad.Security.TLSServerName = "other.test"
	if _, err := NewRedisStore(bad); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("wrong server name: %v", err)
	}
	if _, err := NewRedisStore(config("writer", "nope")); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("wrong password: %v", err)
	}
	if _, err := NewRedisStore(RedisStoreConfig{Port: uint32(tlsPort), TimeoutMs: 1000}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("plain TCP to the TLS port: %v", err)
	}
	if _, err := NewRedisClusterStore(RedisClusterStoreConfig{Nodes: fmt.Sprintf("127.0.0.1:%d", tlsPort),
		Security: RedisSecurity{TLS: true, TLSCertFile: path("server.crt")}}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a certificate without its key: %v", err)
	}
}
