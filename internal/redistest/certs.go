package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Certs are PEM files made for one test with crypto/x509, so TLS tests need
// no openssl and no certificate checked into the repository: a CA, a server
// certificate it signed for 127.0.0.1 and localhost, and a client
// certificate it signed (for mutual TLS). Two NewCerts calls give two
// unrelated CAs, which is how a test gets a CA that does not verify.
type Certs struct {
	Dir            string
	CAFile         string
	ServerCertFile string
	ServerKeyFile  string
	ClientCertFile string
	ClientKeyFile  string

	pool   *x509.CertPool
	client tls.Certificate
}

// NewCerts writes a fresh CA, server and client certificate under a
// temporary directory removed when the test ends. They are valid from an
// hour ago (clock skew) for a day.
func NewCerts(t testing.TB) *Certs {
	t.Helper()
	dir := t.TempDir()
	c := &Certs{
		Dir:            dir,
		CAFile:         filepath.Join(dir, "ca.pem"),
		ServerCertFile: filepath.Join(dir, "server.pem"),
		ServerKeyFile:  filepath.Join(dir, "server-key.pem"),
		ClientCertFile: filepath.Join(dir, "client.pem"),
		ClientKeyFile:  filepath.Join(dir, "client-key.pem"),
	}
	notBefore, notAfter := time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)

	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: "simpleqd test CA"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatalf("certs: CA: %v", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatalf("certs: CA: %v", err)
	}
	writePEM(t, c.CAFile, "CERTIFICATE", caDER)
	c.pool = x509.NewCertPool()
	c.pool.AddCert(ca)

	issue := func(name string, server bool, certFile, keyFile string) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: serial(t),
			Subject:      pkix.Name{CommonName: name},
			NotBefore:    notBefore,
			NotAfter:     notAfter,
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		if server {
			// A server is a client too: of its master (replication) and
			// of the other nodes (cluster bus), with this certificate.
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
			tmpl.DNSNames = []string{"localhost"}
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatalf("certs: %s: %v", name, err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatalf("certs: %s key: %v", name, err)
		}
		writePEM(t, certFile, "CERTIFICATE", der)
		writePEM(t, keyFile, "PRIVATE KEY", keyDER)
	}
	issue("redis server", true, c.ServerCertFile, c.ServerKeyFile)
	issue("simpleqd client", false, c.ClientCertFile, c.ClientKeyFile)

	c.client, err = tls.LoadX509KeyPair(c.ClientCertFile, c.ClientKeyFile)
	if err != nil {
		t.Fatalf("certs: client pair: %v", err)
	}
	return c
}

// ClientTLS returns a client configuration that trusts the CA and presents
// the client certificate, which every server Start makes with these
// certificates accepts, with or without RequireClientCert.
func (c *Certs) ClientTLS() *tls.Config {
	return &tls.Config{RootCAs: c.pool, Certificates: []tls.Certificate{c.client}, MinVersion: tls.VersionTLS12}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("certs: key: %v", err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("certs: serial: %v", err)
	}
	return n
}

func writePEM(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatalf("certs: %v", err)
	}
}
