package api

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// validSeeds are inputs at the edges of the grammar, with the answer
// json.Valid gives (checked too, so a wrong expectation here fails).
var validSeeds = []struct {
	in   string
	want bool
}{
	{`{}`, true}, {`[]`, true}, {` {"a":1} `, true}, {"\t\n\r [ ] \n", true},
	{`"s"`, true}, {`0`, true}, {`-0`, true}, {`-0.5e+10`, true}, {`1E-2`, true}, {`123.456`, true},
	{`true`, true}, {`false`, true}, {`null`, true},
	{`{"a":[1,{"b":null}],"c":"\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00"}`, true},
	{`{"jobs":[{"payload":{"data":"x"}},{"payload":{},"idempotencyKey":"k","delay":5}]}`, true},
	{"\"caf\xc3\xa9 \xff\"", true}, // bytes >= 0x80 are utf8.Valid's business
	{``, false}, {` `, false}, {`{`, false}, {`}`, false}, {`[`, false}, {`[1,]`, false}, {`[,1]`, false},
	{`{"a"}`, false}, {`{"a":}`, false}, {`{"a":1,}`, false}, {`{,"a":1}`, false}, {`{a:1}`, false},
	{`{"a" 1}`, false}, {`{1:1}`, false}, {`{"a":1]`, false}, {`[1}`, false}, {`{} {}`, false}, {`1 2`, false},
	{`01`, false}, {`-`, false}, {`1.`, false}, {`.5`, false}, {`1e`, false}, {`1e+`, false}, {`+1`, false},
	{`-a`, false}, {`0x1`, false}, {`1.e2`, false}, {`NaN`, false}, {`Infinity`, false},
	{`tru`, false}, {`truex`, false}, {`nul`, false}, {`True`, false},
	{`"abc`, false}, {`"\x"`, false}, {`"\u12"`, false}, {`"\u12g4"`, false}, {`"\`, false}, {`"\u`, false},
	{"\"a\nb\"", false}, {"\"a\x00b\"", false}, {"\"\x1f\"", false}, {"\"\x7f\"", true},
	{`{"a":"b"}x`, false}, {"\x00", false}, {`[1,2]]`, false}, {`[[]`, false},
}

func TestValidJSONEdges(t *testing.T) {
	for _, c := range validSeeds {
		require.Equal(t, c.want, json.Valid([]byte(c.in)), "the expectation for %q is not json.Valid's", c.in)
		require.Equal(t, c.want, validJSON([]byte(c.in)), "%q", c.in)
	}
}

// json.Valid allows 10,000 nested objects and arrays, and not one more.
func TestValidJSONDepth(t *testing.T) {
	for _, depth := range []int{maxJSONDepth, maxJSONDepth + 1} {
		for _, open := range []string{"[", `{"a":`} {
			closer := "]"
			if open != "[" {
				closer = "}"
			}
			in := []byte(strings.Repeat(open, depth) + "1" + strings.Repeat(closer, depth))
			require.Equal(t, json.Valid(in), validJSON(in), "depth %d of %s", depth, open)
			require.Equal(t, depth <= maxJSONDepth, validJSON(in), "depth %d of %s", depth, open)
		}
	}
}

func FuzzValidJSONMatchesStdlib(f *testing.F) {
	for _, c := range validSeeds {
		f.Add([]byte(c.in))
	}
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		require.Equal(t, json.Valid(data), validJSON(data), "%q", data)
	})
}

// A 1,000-job batch body, as the bench's batch clients send it.
func batchBody() []byte {
	var b strings.Builder
	b.WriteString(`{"jobs":[`)
	for i := range 1000 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"payload":{"data":"` + strings.Repeat("x", 180) + `"}}`)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func BenchmarkValidJSONBatch(b *testing.B) {
	body := batchBody()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if !validJSON(body) {
			b.Fatal("invalid")
		}
	}
}

// BenchmarkStdlibValidBatch is what validJSON replaced, for comparison.
func BenchmarkStdlibValidBatch(b *testing.B) {
	body := batchBody()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if !json.Valid(body) {
			b.Fatal("invalid")
		}
	}
}
