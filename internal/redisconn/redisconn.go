// Package redisconn turns the validated redis section of the configuration
// into go-redis options (single node, Redis Cluster or Sentinel's failover
// client, each with TLS and mutual TLS), describes which of them is in
// effect with secrets redacted, and tells a certificate that does not
// verify apart from a Redis that is merely away.
//
// It exists so that the daemon, `simpleqd check` and the start-up log all
// derive the connection from one place: what check says is what the daemon
// does. Certificate files are read here, when the connection is built,
// rather than in package config, so a reload never fails on a file only
// start-up reads, and every problem with one names the key, the file and
// the reason.
package redisconn

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/simpleq/simpleqd/internal/config"
)

// Options returns the go-redis options for r; the caller adds timeouts and
// retries, then redis.NewUniversalClient picks the client the options
// describe: a failover client for Sentinel (MasterName set), a cluster
// client for Cluster (IsClusterMode, so one seed is enough), else a single
// node. It reads the certificate files and fails on one that is missing,
// unreadable or not PEM, naming it. It must not be called for the embedded
// store.
func Options(r config.Redis) (*redis.UniversalOptions, error) {
	e, err := r.Endpoint()
	if err != nil {
		return nil, fmt.Errorf("redis.url: %w", err)
	}
	if e.Mode == config.RedisEmbedded {
		return nil, errors.New("redisconn: the embedded store has no Redis options")
	}
	o := &redis.UniversalOptions{
		Addrs:            e.Addrs,
		Username:         e.Username,
		Password:         e.Password,
		DB:               e.DB,
		MasterName:       e.MasterName,
		SentinelUsername: e.SentinelUsername,
		SentinelPassword: e.SentinelPassword,
		IsClusterMode:    e.Mode == config.RedisCluster,
	}
	if e.TLS {
		if o.TLSConfig, err = TLSConfig(r.TLS); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// TLSConfig builds the client side of TLS from redis.tls: the CA bundle
// (else the system's roots), the client certificate for mutual TLS, the
// server name (else each node's own host, as dialled, which suits a
// cluster or a Sentinel set whose nodes have certificates of their own).
func TLSConfig(t config.TLS) (*tls.Config, error) {
	c := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // opt-in, warned about at start-up
	}
	if t.CAFile != "" {
		pool, err := loadCA(t.CAFile)
		if err != nil {
			return nil, fileError("redis.tls.caFile", t.CAFile, err)
		}
		c.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, err := loadKeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// fileError names the key and the file, then the reason without the path a
// *fs.PathError would repeat: "redis.tls.caFile /etc/ca.pem: no such file
// or directory".
func fileError(key, path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("%s %s: %w", key, path, err)
}

// loadCA reads a PEM bundle in which every block must be a certificate, so
// a key or a truncated file given by mistake is refused rather than leaving
// a pool that verifies nothing.
func loadCA(path string) (*x509.CertPool, error) {
	certs, err := readCerts(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// readCerts parses every CERTIFICATE block of a PEM file.
func readCerts(path string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("holds a PEM %q block; want only CERTIFICATE blocks", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("not PEM: no CERTIFICATE block found")
	}
	return certs, nil
}

// loadKeyPair reads the client certificate and its key, each checked on
// its own first so a problem names the file that has it.
func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	if _, err := readCerts(certFile); err != nil {
		return tls.Certificate{}, fileError("redis.tls.certFile", certFile, err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, fileError("redis.tls.keyFile", keyFile, err)
	}
	if block, _ := pem.Decode(keyPEM); block == nil {
		return tls.Certificate{}, fileError("redis.tls.keyFile", keyFile, errors.New("not PEM: no PRIVATE KEY block found"))
	} else if !strings.HasSuffix(block.Type, "PRIVATE KEY") {
		return tls.Certificate{}, fileError("redis.tls.keyFile", keyFile, fmt.Errorf("holds a PEM %q block; want a PRIVATE KEY", block.Type))
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, fileError("redis.tls.certFile", certFile, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("redis.tls.certFile %s and redis.tls.keyFile %s: %w", certFile, keyFile, err)
	}
	return cert, nil
}
