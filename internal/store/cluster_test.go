package store_test

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/store"
)

// crc16 is Redis Cluster's key hash (CRC16-CCITT/XMODEM).
func crc16(b string) uint16 {
	var crc uint16
	for i := 0; i < len(b); i++ {
		crc ^= uint16(b[i]) << 8
		for j := 0; j < 8; j++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// slot follows Redis' hash tag rule: hash only the part inside the first {…}.
func slot(key string) uint16 {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	return crc16(key) % 16384
}

// Every key of a queue — and so every key any script is given — lives in one
// cluster slot, for queue names of every allowed shape.
func TestQueueKeysShareOneSlot(t *testing.T) {
	t.Parallel()
	s, err := store.New(nil, store.Options{Prefix: "simpleq"})
	require.NoError(t, err)
	require.Equal(t, uint16(0x31C3), crc16("123456789"), "CRC16/XMODEM known answer")
	for _, q := range []string{"emails", "a.b", "A-Z_0.9", "x", strings.Repeat("q", 128)} {
		keys := s.Keys(q).List()
		require.Len(t, keys, 17) // 11 of lib.lua, 6 of flow keys' lanes
		for _, k := range keys {
			require.Equal(t, slot(keys[0]), slot(k), "queue %q key %s", q, k)
			require.Contains(t, k, "{"+q+"}")
		}
	}
}

// Scripts may only touch keys they were given: every redis.call names a key
// through one of lib.lua's K_* variables (bound to KEYS), never a built string.
func TestScriptsTouchOnlyDeclaredKeys(t *testing.T) {
	t.Parallel()
	_, file, _, _ := runtime.Caller(0)
	files, err := filepath.Glob(filepath.Join(filepath.Dir(file), "..", "lua", "*.lua"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	call := regexp.MustCompile(`redis\.call\('([A-Z]+)'(?:,\s*([^,)]+))?`)
	keyless := map[string]bool{"TIME": true}
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			if keyless[m[1]] {
				continue
			}
			require.Regexp(t, `^(K_[A-Z]+|key)$`, strings.TrimSpace(m[2]), "%s: %s", filepath.Base(f), m[0])
		}
		require.NotRegexp(t, `redis\.call\('(KEYS|SCAN)'`, string(src), "%s must not scan the keyspace", f)
	}
}
