package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sort"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// referenceParseObject is the straightforward json.Decoder walk parseObject
// replaced; the scanner must agree with it on every valid input.
func referenceParseObject(data []byte) (map[string]json.RawMessage, []string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, nil, errors.New("not a JSON object")
	}
	fields := map[string]json.RawMessage{}
	dupSet := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		key := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, err
		}
		if _, seen := fields[key]; seen {
			dupSet[key] = true
		}
		fields[key] = raw
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, errors.New("trailing data")
	}
	dups := []string{}
	for k := range dupSet {
		dups = append(dups, k)
	}
	sort.Strings(dups)
	return fields, dups, nil
}

var scanSeeds = []string{
	`{}`, ` { } `, `{"a":1}`, `{"a":1,"a":2}`, `{"payload":{"x":[1,2,{"y":"}]"}]},"delay":1.5e3}`,
	`{"k\"ey":"v\\","b":true,"c":null,"d":false,"e":-0.1}`, `{"\u00e9":"x","é":"y"}`,
	"{\n\t\"a\" : [ ] , \"b\" : { } \n}", `[1,2]`, `"s"`, `{"a":"\\\""}`,
	`{"a\\":"b\\\\","c":"\\\"\\\\\""}`, `{"\\\\\\":[ "\"" , "\\" ],"x":"\u005c"}`, `{"":""}`,
	`{"jobs":[{"payload":{}},{"payload":{"a":"b"},"idempotencyKey":"k"}]}`,
}

func FuzzParseObjectMatchesDecoder(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) || !utf8.Valid(data) { // readObject checks both first
			return
		}
		want, wantDups, werr := referenceParseObject(data)
		got, gotDups, gerr := parseObject(data)
		if werr != nil {
			require.Error(t, gerr, "%q", data)
			return
		}
		require.NoError(t, gerr, "%q", data)
		require.Equal(t, wantDups, gotDups, "%q", data)
		require.Equal(t, len(want), len(got), "%q", data)
		for k, v := range want {
			require.Equal(t, string(v), string(bytes.TrimSpace(got[k])), "%q member %q", data, k)
		}
	})
}

func FuzzSplitArrayMatchesUnmarshal(f *testing.F) {
	for _, s := range append(scanSeeds, `[]`, `[ {"a":[1,"]"]} , 2 ,"x"]`, `[[],[[]],{}]`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) || !utf8.Valid(data) { // readObject checks both first
			return
		}
		var want []json.RawMessage
		werr := json.Unmarshal(data, &want)
		got, gerr := splitArray(data)
		if werr != nil {
			require.Error(t, gerr, "%q", data)
			return
		}
		require.NoError(t, gerr, "%q", data)
		require.Equal(t, len(want), len(got), "%q", data)
		for i := range want {
			require.Equal(t, string(want[i]), string(got[i]), "%q element %d", data, i)
		}
	})
}
