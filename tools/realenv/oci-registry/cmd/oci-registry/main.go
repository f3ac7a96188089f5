// Command oci-registry serves distribution's registry (the
// github.com/distribution/distribution/v3 application, in-memory storage)
// over TLS on the loopback, for tests that push charts with `helm push` and
// pull them by oci:// as helm, helmfile and bootstrap do against a public
// registry, without the network:
//
//	oci-registry DIR
//
// It writes DIR/ca.crt (a self-signed certificate for 127.0.0.1 and
// localhost: give it to Go programs as SSL_CERT_FILE), then DIR/addr
// (`127.0.0.1:PORT`, written once the port accepts connections), logs each
// request to DIR/registry.log, and serves the registry API at /v2/ and the
// files under DIR/files at https://ADDR/files/ (a classic helm chart
// repository: an index.yaml and its .tgz, as `helm repo index` writes them)
// until its standard input closes or it is signalled, so that it never
// outlives the test that started it.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
	"github.com/sirupsen/logrus"
)

const config = `
version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  inmemory: {}
  delete:
    enabled: true
http:
  secret: bootstrap-test-registry
`

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: oci-registry DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "oci-registry: %v\n", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	cert, err := selfSigned(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	// The registry logs through logrus' standard logger (registry.NewRegistry
	// would configure it; the bare application does not).
	logrus.SetOutput(logFile)
	cfg, err := configuration.Parse(strings.NewReader(config))
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	app := handlers.NewApp(ctx, cfg)
	files := filepath.Join(dir, "files")
	if err := os.MkdirAll(files, 0o755); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/v2/", app)
	mux.Handle("/files/", http.StripPrefix("/files/", http.FileServer(http.Dir(files))))
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	server := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(logFile, "", log.LstdFlags),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}
	done := make(chan error, 1)
	go func() { done <- server.Serve(tls.NewListener(listener, server.TLSConfig)) }()
	// The address last: a reader that sees it may connect at once.
	addr := listener.Addr().String()
	tmp := filepath.Join(dir, ".addr")
	if err := os.WriteFile(tmp, []byte(addr+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "addr")); err != nil {
		return err
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	stdin := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stdin)
	}()
	select {
	case err := <-done:
		return err
	case <-stop:
	case <-stdin:
	}
	shutdown, cancelShutdown := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelShutdown()
	return server.Shutdown(shutdown)
}

// selfSigned makes a key and a certificate for 127.0.0.1 and localhost,
// valid one day, and writes the certificate (PEM) to path.
func selfSigned(path string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "bootstrap test registry"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	pemCert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(path, pemCert, 0o644); err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
