package api

import (
	"crypto/sha256"

	"github.com/simpleq/simpleqd/internal/config"
)

// keyring is the set of accepted keys as auth.go compares them: the
// SHA-256 digest of every non-empty key, full-access ones (scoped nil) and
// auth.keys ones (scoped their entry), index by index.
type keyring struct {
	// src is the configuration it was built from, to reuse it while that
	// stays current (Options.Auth returns one pointer per loaded config).
	src     *config.Auth
	digests [][sha256.Size]byte
	scoped  []*config.Key
}

// newKeyring hashes the keys of a. Empty keys are left out: an empty key
// would let an empty token in, and is never a valid key.
func newKeyring(src *config.Auth, apiKeys []string, keys []config.Key) *keyring {
	kr := &keyring{src: src}
	for _, k := range apiKeys {
		if k != "" {
			kr.digests = append(kr.digests, sha256.Sum256([]byte(k)))
			kr.scoped = append(kr.scoped, nil)
		}
	}
	for i := range keys {
		if keys[i].Key != "" {
			kr.digests = append(kr.digests, sha256.Sum256([]byte(keys[i].Key)))
			kr.scoped = append(kr.scoped, &keys[i])
		}
	}
	return kr
}

// keyring returns the keys in force now. With Options.Auth it is hashed
// once per configuration (a reload gives a new *config.Auth, and so a new
// keyring: a key and its reach change together, in one step); with the
// older Options.APIKeys it is built per request, as the keys were read.
func (s *Server) keyring() *keyring {
	if s.auth != nil {
		a := s.auth()
		if kr := s.ring.Load(); kr != nil && kr.src == a {
			return kr
		}
		var kr *keyring
		if a == nil {
			kr = newKeyring(nil, nil, nil)
		} else {
			kr = newKeyring(a, a.APIKeys, a.Keys)
		}
		s.ring.Store(kr)
		return kr
	}
	var keys []string
	if s.apiKeys != nil {
		keys = s.apiKeys()
	}
	return newKeyring(nil, keys, nil)
}
