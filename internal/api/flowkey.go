package api

import (
	"encoding/json"
	"unicode/utf8"
)

// maxFlowKeyBytes is keys.md §1's bound on a flow key.
const maxFlowKeyBytes = 255

// validFlowKey is keys.md §1's rule, the one check for a flow key wherever
// the API takes one (publish, lists, bulk cancel, the keys endpoints):
// 1-255 bytes of UTF-8, no control characters.
func validFlowKey(k string) bool {
	if len(k) < 1 || len(k) > maxFlowKeyBytes || !utf8.ValidString(k) {
		return false
	}
	for _, r := range k {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}

// flowKeyField reads the JSON member flowKey of a request body: the key
// and true when given and valid; a wrong type or an invalid key records a
// fieldErrors.flowKey; absent (or null) answers false without one.
func (v *validator) flowKeyField(fields map[string]json.RawMessage) (string, bool) {
	raw, ok := given(fields, "flowKey")
	if !ok {
		return "", false
	}
	var k string
	switch {
	case kindOf(raw) != kindString || json.Unmarshal(raw, &k) != nil:
		v.fieldError("flowKey", typeMessage(kindString, raw))
	case !validFlowKey(k):
		v.fieldError("flowKey", msgFlowKey)
	default:
		return k, true
	}
	return "", false
}
