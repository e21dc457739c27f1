package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits of the wire contract.
const (
	maxIdempotencyKeyLen = 255
	maxDelaySeconds      = 86400
	maxReasonLen         = 500
	maxBatchJobs         = 1000
	// maxRetryAfterSeconds is the largest defer time.Duration can hold; the
	// contract sets no ceiling, so this is only an overflow guard.
	maxRetryAfterSeconds = float64(math.MaxInt64 / int64(time.Second))
	maxAttemptNumber     = math.MaxInt32
)

// validationErrors is the 400 body of a request that failed validation, in
// the shape SimpleQ's clients parse (zod's flatten()): form-level messages
// plus messages per field path.
type validationErrors struct {
	FormErrors  []string            `json:"formErrors"`
	FieldErrors map[string][]string `json:"fieldErrors"`
}

func newValidationErrors() *validationErrors {
	return &validationErrors{FormErrors: []string{}, FieldErrors: map[string][]string{}}
}

// readBody reads the whole request body, at most s.maxBytes of it. On failure
// it has written the response (413 when too large) and returns false.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.ContentLength > s.maxBytes {
		writeError(w, http.StatusRequestEntityTooLarge, msgTooLarge)
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, msgTooLarge)
			return nil, false
		}
		// The client broke the upload (reset, bad chunking): its fault, not ours.
		writeFormError(w, "Could not read request body")
		return nil, false
	}
	return body, true
}

// readObject reads a request body that must be a JSON object and returns its
// top-level members as the exact bytes sent (json.RawMessage, never
// re-encoded). Checks in order: size (413), content type (415), JSON syntax
// and UTF-8 (400 form error), object (400 form error), duplicate member names
// (400 field error). With emptyIsObject an empty (or all-whitespace) body is
// accepted as {}, so "POST .../ack" with no body works; requireJSON has
// already insisted on the JSON content type, which is what keeps such a
// bodiless request out of a cross-site page's reach. On failure the response
// has been written and ok is false.
func (s *Server) readObject(w http.ResponseWriter, r *http.Request, emptyIsObject bool) (map[string]json.RawMessage, bool) {
	body, ok := s.readBody(w, r)
	if !ok {
		return nil, false
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 && emptyIsObject {
		return map[string]json.RawMessage{}, true
	}
	if !isJSONContentType(r.Header.Get("Content-Type")) {
		writeError(w, http.StatusUnsupportedMediaType, msgNotJSON)
		return nil, false
	}
	if len(trimmed) == 0 || !utf8.Valid(trimmed) || !validJSON(trimmed) {
		writeFormError(w, msgInvalidJSON)
		return nil, false
	}
	if kindOf(trimmed) != kindObject {
		writeFormError(w, msgNotAnObject)
		return nil, false
	}
	fields, dups, err := parseObject(trimmed)
	if err != nil { // unreachable after validJSON, but never a 500 for input
		writeFormError(w, msgInvalidJSON)
		return nil, false
	}
	if len(dups) > 0 {
		ve := newValidationErrors()
		for _, k := range dups {
			ve.FieldErrors[k] = append(ve.FieldErrors[k], "Duplicate field")
		}
		writeValidation(w, ve)
		return nil, false
	}
	return fields, true
}

// isJSONContentType accepts application/json with optional parameters; a
// charset, if given, must be UTF-8 (JSON on the wire is UTF-8, RFC 8259).
func isJSONContentType(ct string) bool {
	if ct == contentTypeJSON {
		return true // what nearly every client sends: no parsing on the publish path
	}
	if ct == "" {
		return false
	}
	mediaType, params, err := mime.ParseMediaType(ct)
	if err != nil || mediaType != contentTypeJSON {
		return false
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
		return false
	}
	return true
}

// JSON value kinds, named as validation messages name them.
const (
	kindObject  = "object"
	kindArray   = "array"
	kindString  = "string"
	kindNumber  = "number"
	kindBoolean = "boolean"
	kindNull    = "null"
)

// kindOf names the kind of a valid JSON value from its first byte.
func kindOf(raw []byte) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return kindNull
	}
	switch raw[0] {
	case '{':
		return kindObject
	case '[':
		return kindArray
	case '"':
		return kindString
	case 't', 'f':
		return kindBoolean
	case 'n':
		return kindNull
	default:
		return kindNumber
	}
}

// validator collects every problem of one request body so the client learns
// all of them at once. prefix names nested objects ("jobs.3.") in field paths.
type validator struct {
	errs   *validationErrors
	prefix string
}

func newValidator() *validator { return &validator{errs: newValidationErrors()} }

// nested returns a validator reporting into the same errors under name.
func (v *validator) nested(name string) *validator {
	return &validator{errs: v.errs, prefix: v.prefix + name + "."}
}

func (v *validator) fieldError(name, msg string) {
	key := v.prefix + name
	v.errs.FieldErrors[key] = append(v.errs.FieldErrors[key], msg)
}

func (v *validator) failed() bool {
	return len(v.errs.FormErrors) > 0 || len(v.errs.FieldErrors) > 0
}

func typeMessage(want string, raw []byte) string {
	return fmt.Sprintf("Expected %s, received %s", want, kindOf(raw))
}

// onlyFields rejects members other than allowed: a misspelt or unsupported
// option must not be silently ignored.
func (v *validator) onlyFields(fields map[string]json.RawMessage, allowed ...string) {
	unknown := make([]string, 0)
outer:
	for k := range fields {
		for _, a := range allowed {
			if k == a {
				continue outer
			}
		}
		unknown = append(unknown, k)
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		v.fieldError(k, "Unrecognized field")
	}
}

// given returns an optional member's value; absent and null both mean "not given".
func given(fields map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	raw, ok := fields[name]
	if !ok || kindOf(raw) == kindNull {
		return nil, false
	}
	return raw, true
}

// optionalString validates a string member of minLen..maxLen characters
// (Unicode code points). ok is true only when it was given and valid.
func (v *validator) optionalString(fields map[string]json.RawMessage, name string, minLen, maxLen int) (string, bool) {
	raw, ok := given(fields, name)
	if !ok {
		return "", false
	}
	if kindOf(raw) != kindString {
		v.fieldError(name, typeMessage(kindString, raw))
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		v.fieldError(name, typeMessage(kindString, raw))
		return "", false
	}
	n := utf8.RuneCountInString(s)
	switch {
	case n < minLen:
		v.fieldError(name, fmt.Sprintf("String must contain at least %d character(s)", minLen))
		return "", false
	case n > maxLen:
		v.fieldError(name, fmt.Sprintf("String must contain at most %d character(s)", maxLen))
		return "", false
	}
	return s, true
}

// number validates a JSON number member within [minV, maxV]. Strings holding
// numbers are refused: the contract says "a JSON number".
func (v *validator) number(fields map[string]json.RawMessage, name string, required bool, minV, maxV float64) (float64, bool) {
	raw, present := fields[name]
	if !present {
		if required {
			v.fieldError(name, "Required")
		}
		return 0, false
	}
	if kindOf(raw) == kindNull && !required {
		return 0, false
	}
	if kindOf(raw) != kindNumber {
		v.fieldError(name, typeMessage(kindNumber, raw))
		return 0, false
	}
	f, err := strconv.ParseFloat(string(bytes.TrimSpace(raw)), 64)
	if err != nil && !math.IsInf(f, 0) { // ±Inf (out of range) falls to the bounds below
		v.fieldError(name, "Invalid number")
		return 0, false
	}
	switch {
	case math.IsNaN(f):
		v.fieldError(name, "Invalid number")
		return 0, false
	case f < minV:
		v.fieldError(name, "Number must be greater than or equal to "+formatBound(minV))
		return 0, false
	case f > maxV:
		v.fieldError(name, "Number must be less than or equal to "+formatBound(maxV))
		return 0, false
	}
	return f, true
}

func formatBound(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// optionalInt validates an optional integer member (a JSON number with no
// fractional part, so 2 and 2.0 are both accepted) within [minV, maxV].
func (v *validator) optionalInt(fields map[string]json.RawMessage, name string, minV, maxV int) (int, bool) {
	raw, ok := given(fields, name)
	if !ok {
		return 0, false
	}
	if kindOf(raw) != kindNumber {
		v.fieldError(name, typeMessage("integer", raw))
		return 0, false
	}
	f, err := strconv.ParseFloat(string(bytes.TrimSpace(raw)), 64)
	if err != nil && !math.IsInf(f, 0) {
		v.fieldError(name, "Invalid number")
		return 0, false
	}
	switch {
	case !math.IsInf(f, 0) && f != math.Trunc(f):
		v.fieldError(name, "Expected integer, received float")
		return 0, false
	case f < float64(minV):
		v.fieldError(name, fmt.Sprintf("Number must be greater than or equal to %d", minV))
		return 0, false
	case f > float64(maxV):
		v.fieldError(name, fmt.Sprintf("Number must be less than or equal to %d", maxV))
		return 0, false
	}
	return int(f), true
}

// optionalBool validates an optional boolean member.
func (v *validator) optionalBool(fields map[string]json.RawMessage, name string) (bool, bool) {
	raw, ok := given(fields, name)
	if !ok {
		return false, false
	}
	if kindOf(raw) != kindBoolean {
		v.fieldError(name, typeMessage(kindBoolean, raw))
		return false, false
	}
	return bytes.HasPrefix(bytes.TrimSpace(raw), []byte("true")), true
}

// seconds converts validated wire seconds (fractions allowed) to a Duration,
// rounded to the nanosecond.
func seconds(f float64) time.Duration {
	return time.Duration(math.Round(f * float64(time.Second)))
}
