package redisconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/simpleq/simpleqd/internal/config"
)

// StartupError returns the error a starting daemon must stop on when err,
// met while reaching Redis, comes from a TLS handshake that cannot succeed
// however long the daemon waits: a server certificate that does not verify
// against redis.tls.caFile, is not valid for the server name, or has
// expired; a server that refuses the client certificate or wants one. The
// error names the key, the file and the reason (production.md §1: never
// silently skipped, never retried forever behind a 503). It returns nil for
// anything else (Redis away, still loading, refusing connections), which
// start-up waits out.
func StartupError(r config.Redis, err error) error {
	if err == nil {
		return nil
	}
	ca := "redis.tls.caFile " + r.TLS.CAFile
	if r.TLS.CAFile == "" {
		ca = "redis.tls.caFile (unset: the system's CAs)"
	}
	var (
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		invalid x509.CertificateInvalidError
		verify  *tls.CertificateVerificationError
		op      *net.OpError
	)
	switch {
	case errors.As(err, &unknown):
		return fmt.Errorf("%s: %w", ca, unknown)
	case errors.As(err, &host):
		if r.TLS.ServerName != "" {
			return fmt.Errorf("redis.tls.serverName %s: %w", r.TLS.ServerName, host)
		}
		return fmt.Errorf("redis.tls.serverName (unset: the host dialled): %w; set it to a name the certificate is valid for", host)
	case errors.As(err, &invalid):
		return fmt.Errorf("the Redis server's certificate (verified against %s): %w", ca, invalid)
	case errors.As(err, &verify):
		return fmt.Errorf("%s: %w", ca, verify)
	case errors.As(err, &op) && op.Op == "remote error" && op.Err != nil && strings.HasPrefix(op.Err.Error(), "tls: "):
		// The server ended the handshake with an alert: with TLS 1.3 a
		// refused or missing client certificate shows only here.
		if r.TLS.CertFile == "" {
			return fmt.Errorf("redis.tls.certFile (unset): the Redis server wants a client certificate (mutual TLS): %w", op)
		}
		return fmt.Errorf("redis.tls.certFile %s: the Redis server refused it: %w", r.TLS.CertFile, op)
	}
	return nil
}
