package store

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/lua"
	"github.com/simpleq/simpleqd/internal/redistest"
)

var update = flag.Bool("update", false, "rewrite testdata/records/*.golden from the Lua codec (record.lua)")

// recordCase is one stored job: built by record.lua from fields (lua), or
// written here as older versions of the scripts stored it (raw), which
// both halves must still read.
type recordCase struct {
	name string
	// lua: what the Lua half builds, as JSON (see recordGoldenLua).
	lua string
	// raw: a record and history given as bytes instead.
	raw, rawHist string
}

const (
	gT  = "1764620000000" // createdAt of every case
	gTP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
)

var recordCases = []recordCase{
	{name: "plain", lua: `{"op":"publish","payload":"{\"n\":1}"}`},
	{name: "delayed", lua: `{"op":"publish","s":1764620005000,"payload":"{}"}`},
	{name: "idempotency-key", lua: `{"op":"publish","k":"order-\"7\"","payload":"{}"}`},
	{name: "trace", lua: `{"op":"publish","tp":"` + gTP + `","ts":"a=b,c=\"d\"","payload":"{}"}`},
	{name: "priority", lua: `{"op":"publish","pri":7,"payload":"{}"}`},
	{name: "replace-key", lua: `{"op":"publish","rk":"user-1","k":"i-1","payload":"{}"}`},
	{name: "flow-key-escape", lua: `{"op":"publish","fk":"tenant \"a\"\\é","tp":"` + gTP + `","pri":2,"payload":"[1,2]"}`},
	{name: "schedule-tick", lua: `{"op":"tick","sid":"nightly","fk":"acme","pri":3,"tick":"1764620000000","payload":"{}"}`},
	{name: "completed-fast", lua: `{"op":"publish","k":"x","then":"complete_fast","payload":"{}"}`},
	{name: "completed-fast-flow-key", lua: `{"op":"publish","fk":"acme","then":"complete_fast","payload":"{}"}`},
	{name: "cancelled-fast", lua: `{"op":"publish","then":"cancel_fast","payload":"{}"}`},
	{name: "in-flight", lua: `{"op":"publish","lease":["call.1",2,"1764620000000",false],"payload":"{}"}`},
	{name: "probe", lua: `{"op":"publish","lease":["call.2",1,"1764620000000",true],"payload":"{}"}`},
	{name: "retried", lua: `{"op":"meta","m":{"c":1764620000000,"s":1764620000000,"x":1764706400000,"st":"r","a":1,"e":"HTTP 500","wd":1764620001000,"fk":"acme"},` +
		`"hist":[{"attempt":1,"status":"failed","ts":1764620000100,"code":500,"error":"HTTP 500"}],"payload":"{}"}`},
	{name: "awaiting-ack", lua: `{"op":"meta","m":{"c":1764620000000,"s":1764620000000,"x":1764706400000,"st":"w","sc":202,"lc":"defer|1|1764620000300"},"payload":"{}"}`},
	{name: "dead", lua: `{"op":"meta","m":{"c":1764620000000,"s":1764620000000,"x":1764706400000,"st":"d","a":3,"d":1,"e":"HTTP 503","dr":"max_attempts_exhausted","ca":1764620009000,"k":"z"},` +
		`"hist":[{"attempt":1,"status":"deferred","ts":1764620000100,"code":429,"retryAfter":1.5,"scope":"queue","reason":"slow down"},` +
		`{"attempt":1,"status":"failed","ts":1764620001000,"code":503,"error":"HTTP 503","probe":true}],"payload":"{}"}`},
	{name: "completed-with-history", lua: `{"op":"meta","m":{"c":1764620000000,"s":1764620000000,"x":1764706400000,"st":"c","a":2,"sc":200,"ca":1764620003000,"sid":"s1","rk":"r"},` +
		`"hist":[{"attempt":1,"status":"failed","ts":1764620001000},{"attempt":2,"status":"success","ts":1764620003000,"code":200,"acked":true}],"payload":"{}"}`},
	{name: "replayed", lua: `{"op":"meta","m":{"c":1764620000000,"s":1764620010000,"x":1764706410000,"st":"p","h":1},` +
		`"hist":[{"attempt":1,"status":"failed","ts":1764620001000}],"payload":"{}"}`},
	// Older shapes: members in cjson's order (before meta was encoded by
	// hand), and an ack stored as status "acked".
	{name: "legacy-member-order", raw: `{"st":"r","a":1,"x":1764706400000,"c":1764620000000,"s":1764620000000,"k":"x,\"a\":9"}` + "\n{}"},
	{name: "legacy-acked", raw: `{"c":1764620000000,"s":1764620000000,"x":1764706400000,"st":"c","a":1,"ca":1764620001000}` + "\n{}",
		rawHist: `{"attempt":1,"status":"acked","ts":1764620001000,"code":200}`},
}

// recordGoldenLua builds (ARGV[ARG0+1] "build") or reads ("read") a record
// with record.lua's functions, so the test sees exactly what the scripts
// write and read.
const recordGoldenLua = `
local mode, arg = ARGV[ARG0 + 1], ARGV[ARG0 + 2]
if mode == 'build' then
  local c = cjson.decode(arg)
  local rec, hist = nil, ''
  if c.op == 'publish' then
    local s = c.s and fmt('%d', c.s) or '` + gT + `'
    local x = fmt('%d', (c.s or ` + gT + `) + 86400000)
    local tr = c.tp and trace_members(c.tp, c.ts) or ''
    rec = record_new(record_head_new('` + gT + `', s, x), record_new_members(c.fk or '', tr, c.pri or 0),
      c.k or '', c.rk or '', c.payload)
  elseif c.op == 'tick' then
    local head, tail = record_tick_parts(c.sid, c.fk or '', c.pri or 0, c.payload)
    rec = record_head_new('` + gT + `', '` + gT + `', '1764706400000') .. head .. c.tick .. tail
  else
    c.m.a, c.m.d = c.m.a or 0, c.m.d or 0
    rec = encode_record(c.m, c.payload)
  end
  if c['then'] == 'complete_fast' then
    local p, nl = record_fast_open(rec)
    rec = record_complete_fast(rec, p, nl, 200, 1764620000500)
  elseif c['then'] == 'cancel_fast' then
    rec = record_cancel_fast(rec, record_cancel_tail(1764620000700, 'cancelled: by "ops"'))
  end
  for _, e in ipairs(c.hist or {}) do
    if hist == '' then hist = encode_entry(e) else hist = history_append(hist, encode_entry(e)) end
  end
  local lease = ''
  if c.lease then lease = lease_token(c.lease[1], c.lease[2], c.lease[3], c.lease[4]) end
  return { rec, hist, lease }
end
-- read: what each of the codec's readers sees in the record (and lease).
local rec, lease = arg, ARGV[ARG0 + 3]
local out = {}
local function put(k, v)
  if v == nil then return end
  if type(v) == 'string' then v = cjson.encode(v) elseif type(v) == 'number' then v = fmt('%d', v) else v = tostring(v) end
  out[#out + 1] = k .. '=' .. v
end
local m, payload = split_record(rec)
if lease ~= '' then overlay(m, lease) end
for _, f in ipairs({ 'c', 's', 'x', 'st', 'a', 'd', 'o', 't', 'pr', 'h', 'lc', 'sc', 'ca', 'dr', 'k', 'e', 'sid', 'rk', 'pri', 'fk', 'wd', 'tp', 'ts' }) do
  put('meta.' .. f, m[f])
end
put('payload', payload)
local x, st = record_lifetime_state(rec)
put('lifetime_state', fmt('%d %s', x, st))
put('state', record_state(rec))
local cs, st2 = record_created_state(rec)
put('created_state', cs .. ' ' .. st2)
put('untouched', record_untouched(rec) or false)
local p, nl, fc, fk = record_fast_open(rec)
put('fast_open', p and fmt('%d %s', fc, tostring(fk)) or false)
put('cancel_fast', record_cancel_fast(rec, '<tail>}') ~= nil)
if m.lc then
  local k, att, at = last_callback_parse(m.lc)
  put('last_callback', fmt('%s %s %d', k, att, at))
end
if lease ~= '' then
  put('lease', lease)
  put('lease_is_probe', lease_is_probe(lease))
end
-- A decoded record encodes back to the same meta, members in encode_meta's
-- order: the canonical form.
local again = split_record(rec)
put('encoded_again', encode_record(again, payload))
return table.concat(out, '\n')
`

// TestRecordGolden pins the record layout across the two languages: for
// each case record.lua builds the record (compared byte for byte with the
// golden file), record.lua's readers read it back, and record.go decodes
// it (both compared with the golden file too). A layout change on one side
// alone fails here; after a deliberate change run
//
//	go test ./internal/store -run TestRecordGolden -update
//
// and review the diff of testdata/records.
func TestRecordGolden(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed")
	}
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	run := func(args ...any) any {
		src, err := lua.WithPrelude(recordGoldenLua)
		require.NoError(t, err)
		res, err := rdb.Eval(ctx, src, nil, args...).Result() // no per-call values (lib.lua ARG0 = 0)
		require.NoError(t, err)
		return res
	}
	q := QueueParams{Name: "golden", MaxAttempts: 3}
	for _, c := range recordCases {
		t.Run(c.name, func(t *testing.T) {
			rec, hist, lease := c.raw, c.rawHist, ""
			if c.lua != "" {
				r, ok := run("build", c.lua).([]any)
				require.True(t, ok)
				rec, hist, lease = r[0].(string), r[1].(string), r[2].(string)
			}
			luaView, ok := run("read", rec, lease).(string)
			require.True(t, ok)
			j, err := decodeJob(q, "job-1", []byte(rec), []byte(hist))
			require.NoError(t, err)
			goView, err := json.MarshalIndent(j, "", "  ")
			require.NoError(t, err)
			var claimView []byte
			if j.Status == StatusPending || j.Status == StatusProcessing {
				// What a delivery reads of it, had a claim handed it over.
				cr, err := readClaimedRecord(rec)
				require.NoError(t, err)
				require.Equal(t, j.Attempts, cr.A, "claim and GET agree on attempts")
				require.Equal(t, j.DeferCount, cr.D)
				require.Equal(t, j.CreatedAt, fromMS(int64(cr.C)))
				require.Equal(t, string(j.Payload), string(cr.Payload))
				if j.FlowKey != nil {
					require.Equal(t, *j.FlowKey, cr.FlowKey)
				}
				claimView, err = json.MarshalIndent(cr, "", "  ")
				require.NoError(t, err)
			}
			got := fmt.Sprintf("-- record\n%s\n-- history\n%s\n-- lease\n%s\n-- record.lua reads\n%s\n-- record.go decodeJob\n%s\n-- record.go readClaimedRecord\n%s\n",
				rec, hist, lease, luaView, goView, claimView)
			path := filepath.Join("testdata", "records", c.name+".golden")
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
				return
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run with -update to create it")
			require.Equal(t, string(want), got, "%s: the record layout changed on one side (see the test's doc)", path)
		})
	}
}

// TestScriptsReadOnlyTheirCallValues: a script is given only the per-call
// values package lua lists for it, and one that reads another fails
// loudly, rather than reading one of its own arguments in its place.
func TestScriptsReadOnlyTheirCallValues(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed")
	}
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	src, err := lua.WithPrelude("return { ARG0, ARGV[ARG0 + 1], P.rand }")
	require.NoError(t, err)
	_, err = rdb.Eval(ctx, src, nil, "mine").Result()
	require.ErrorContains(t, err, "per-call value rand not given to this script")
	src, err = lua.WithPrelude("return { ARG0, ARGV[ARG0 + 1] }")
	require.NoError(t, err)
	res, err := rdb.Eval(ctx, src, nil, "mine").Result()
	require.NoError(t, err)
	require.Equal(t, []any{int64(0), "mine"}, res, "a script without per-call values starts its own at ARGV[1]")
	for _, name := range lua.All {
		src, err := lua.Source(name)
		require.NoError(t, err)
		want := "local CALL_VALUES = {}"
		if v := lua.CallValues(name); len(v) > 0 {
			want = "local CALL_VALUES = {'" + strings.Join(v, "','") + "'}"
		}
		require.True(t, strings.HasPrefix(src, "local KEYS, ARGV = KEYS, ARGV\n"+want+"\n"), "%s opens with its per-call values", name)
	}
}
