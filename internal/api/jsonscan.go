package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"sort"
)

// Scanning of request bodies that validJSON (json.Valid's grammar) has
// already accepted. A body is checked once as a whole; these functions then
// only find the extent of each member without decoding or copying values,
// which on the batch endpoint (a thousand jobs per body) costs a fraction of
// a json.Decoder walk. They return an error rather than panic on anything
// unexpected, so a caller that skipped validation gets a 400, never a crash.

var errScan = errors.New("malformed JSON")

// skipSpace returns the index of the first non-whitespace byte at or after i.
func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index just past the string starting at data[i] ('"').
// It jumps from quote to quote with bytes.IndexByte (a byte-by-byte walk was
// 12% of the daemon's CPU per batch-published job): a quote ends the string
// unless an odd number of backslashes precede it.
func skipString(data []byte, i int) (int, error) {
	first := i + 1
	for i = first; ; i++ {
		j := bytes.IndexByte(data[i:], '"')
		if j < 0 {
			return 0, errScan
		}
		i += j
		k := i - 1
		for k >= first && data[k] == '\\' {
			k--
		}
		if (i-1-k)%2 == 0 {
			return i + 1, nil
		}
	}
}

// skipValue returns the index just past the value starting at data[i].
func skipValue(data []byte, i int) (int, error) {
	if i >= len(data) {
		return 0, errScan
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for ; i < len(data); i++ {
			switch data[i] {
			case '"':
				end, err := skipString(data, i)
				if err != nil {
					return 0, err
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
		}
		return 0, errScan
	default: // number, true, false, null
		j := i
		for j < len(data) {
			switch data[j] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				if j == i {
					return 0, errScan
				}
				return j, nil
			}
			j++
		}
		if j == i {
			return 0, errScan
		}
		return j, nil
	}
}

// parseObject returns the members of the JSON object data as the exact bytes
// sent (sub-slices of data, never re-encoded) and the sorted names that occur
// more than once (the last occurrence wins in fields). Duplicates are
// reported rather than silently resolved, since "last one wins" would make
// the request mean something other than what one reader of it sees. data
// must have passed validJSON and utf8.Valid.
func parseObject(data []byte) (map[string]json.RawMessage, []string, error) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, nil, errors.New("not a JSON object")
	}
	fields := make(map[string]json.RawMessage, 4)
	var dups []string
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		i++
	} else {
		for {
			if i >= len(data) || data[i] != '"' {
				return nil, nil, errScan
			}
			end, err := skipString(data, i)
			if err != nil {
				return nil, nil, err
			}
			key, err := memberName(data[i:end])
			if err != nil {
				return nil, nil, err
			}
			i = skipSpace(data, end)
			if i >= len(data) || data[i] != ':' {
				return nil, nil, errScan
			}
			i = skipSpace(data, i+1)
			vend, err := skipValue(data, i)
			if err != nil {
				return nil, nil, err
			}
			if _, seen := fields[key]; seen && !contains(dups, key) {
				dups = append(dups, key)
			}
			fields[key] = json.RawMessage(data[i:vend:vend])
			i = skipSpace(data, vend)
			if i < len(data) && data[i] == ',' {
				i = skipSpace(data, i+1)
				continue
			}
			if i < len(data) && data[i] == '}' {
				i++
				break
			}
			return nil, nil, errScan
		}
	}
	if skipSpace(data, i) != len(data) {
		return nil, nil, errors.New("trailing data after JSON object")
	}
	sort.Strings(dups)
	if dups == nil {
		dups = []string{}
	}
	return fields, dups, nil
}

// splitArray returns the elements of the JSON array data as sub-slices.
// data must have passed validJSON.
func splitArray(data []byte) ([]json.RawMessage, error) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '[' {
		return nil, errors.New("not a JSON array")
	}
	var items []json.RawMessage
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return items, nil
	}
	for {
		end, err := skipValue(data, i)
		if err != nil {
			return nil, err
		}
		items = append(items, json.RawMessage(data[i:end:end]))
		i = skipSpace(data, end)
		if i < len(data) && data[i] == ',' {
			i = skipSpace(data, i+1)
			continue
		}
		if i < len(data) && data[i] == ']' {
			return items, nil
		}
		return nil, errScan
	}
}

// memberName decodes a quoted member name; names without escapes (nearly
// all) are taken as they are.
func memberName(quoted []byte) (string, error) {
	plain := true
	for _, c := range quoted[1 : len(quoted)-1] {
		if c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		return string(quoted[1 : len(quoted)-1]), nil
	}
	var s string
	err := json.Unmarshal(quoted, &s)
	return s, err
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
