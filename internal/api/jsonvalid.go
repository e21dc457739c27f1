package api

// validJSON reports whether data is one JSON value (RFC 8259) with optional
// surrounding whitespace, exactly as encoding/json's Valid does: the same
// grammar, the same escapes, raw control characters refused inside strings,
// bytes of 0x80 and above accepted as they are (utf8.Valid checks those),
// and the same nesting limit of 10,000. FuzzValidJSONMatchesStdlib holds it
// to that.
//
// Why not json.Valid: it runs a state machine with a function call per byte,
// about 5 ns a byte here. Every publish body passes through it, and for a
// 1,000-job batch (240 KB) that was ~1 ms, a fifth of the daemon's CPU per
// batch-published job. This walks the same grammar in tight loops.
func validJSON(data []byte) bool {
	v := jsonValidator{data: data}
	v.skipSpace()
	if !v.value() {
		return false
	}
	v.skipSpace()
	return v.i == len(v.data)
}

// maxJSONDepth is encoding/json's nesting limit: json.Valid refuses a value
// nested deeper than this many objects and arrays.
const maxJSONDepth = 10000

type jsonValidator struct {
	data []byte
	i    int
	// stack holds the open containers, '{' or '[', innermost last.
	stack []byte
}

func (v *jsonValidator) skipSpace() {
	for v.i < len(v.data) {
		switch v.data[v.i] {
		case ' ', '\t', '\n', '\r':
			v.i++
		default:
			return
		}
	}
}

// value consumes one value, containers iteratively so depth costs no Go
// stack.
func (v *jsonValidator) value() bool {
	for {
		// A value starts here.
		if v.i >= len(v.data) {
			return false
		}
		switch c := v.data[v.i]; {
		case c == '{' || c == '[':
			if len(v.stack) >= maxJSONDepth {
				return false
			}
			v.stack = append(v.stack, c)
			v.i++
			v.skipSpace()
			if v.i >= len(v.data) {
				return false
			}
			if (c == '{' && v.data[v.i] == '}') || (c == '[' && v.data[v.i] == ']') {
				v.i++
				v.stack = v.stack[:len(v.stack)-1]
				break // an empty container is a complete value
			}
			if c == '{' && !v.member() {
				return false
			}
			continue // the container's first value
		case c == '"':
			if !v.str() {
				return false
			}
		case c == '-' || (c >= '0' && c <= '9'):
			if !v.number() {
				return false
			}
		case c == 't':
			if !v.literal("true") {
				return false
			}
		case c == 'f':
			if !v.literal("false") {
				return false
			}
		case c == 'n':
			if !v.literal("null") {
				return false
			}
		default:
			return false
		}
		// A value ended: close containers or go on to the next element.
		for {
			if len(v.stack) == 0 {
				return true
			}
			v.skipSpace()
			if v.i >= len(v.data) {
				return false
			}
			open := v.stack[len(v.stack)-1]
			c := v.data[v.i]
			v.i++
			if c == ',' {
				v.skipSpace()
				if open == '{' && !v.member() {
					return false
				}
				break // the next element's value
			}
			if (open == '{' && c == '}') || (open == '[' && c == ']') {
				v.stack = v.stack[:len(v.stack)-1]
				continue
			}
			return false
		}
	}
}

// member consumes an object member's key and colon, up to its value.
func (v *jsonValidator) member() bool {
	if v.i >= len(v.data) || v.data[v.i] != '"' || !v.str() {
		return false
	}
	v.skipSpace()
	if v.i >= len(v.data) || v.data[v.i] != ':' {
		return false
	}
	v.i++
	v.skipSpace()
	return true
}

// plainStringByte marks the bytes a string may hold as they are: all but
// the quote, the backslash and control characters.
var plainStringByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str consumes a string starting at its opening quote.
func (v *jsonValidator) str() bool {
	v.i++ // the opening quote
	d := v.data
	for v.i < len(d) {
		// Most of a string is plain bytes: skip them in a tight loop, on a
		// local index (v.i, behind a pointer, would be stored every byte).
		i := v.i
		for i < len(d) && plainStringByte[d[i]] {
			i++
		}
		v.i = i
		if v.i >= len(d) {
			return false
		}
		c := d[v.i]
		switch {
		case c == '"':
			v.i++
			return true
		case c == '\\':
			v.i++
			if v.i >= len(v.data) {
				return false
			}
			switch v.data[v.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				v.i++
			case 'u':
				if v.i+4 >= len(v.data) {
					return false
				}
				for _, h := range v.data[v.i+1 : v.i+5] {
					if !isHex(h) {
						return false
					}
				}
				v.i += 5
			default:
				return false
			}
		default: // a control character
			return false
		}
	}
	return false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// number consumes -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (v *jsonValidator) number() bool {
	d := v.data
	if d[v.i] == '-' {
		v.i++
	}
	switch {
	case v.i < len(d) && d[v.i] == '0':
		v.i++
	case v.i < len(d) && d[v.i] >= '1' && d[v.i] <= '9':
		v.digits()
	default:
		return false
	}
	if v.i < len(d) && d[v.i] == '.' {
		v.i++
		if !v.digits() {
			return false
		}
	}
	if v.i < len(d) && (d[v.i] == 'e' || d[v.i] == 'E') {
		v.i++
		if v.i < len(d) && (d[v.i] == '+' || d[v.i] == '-') {
			v.i++
		}
		if !v.digits() {
			return false
		}
	}
	return true
}

// digits consumes one or more digits; false if there is none.
func (v *jsonValidator) digits() bool {
	start := v.i
	for v.i < len(v.data) && v.data[v.i] >= '0' && v.data[v.i] <= '9' {
		v.i++
	}
	return v.i > start
}

func (v *jsonValidator) literal(word string) bool {
	if len(v.data)-v.i < len(word) || string(v.data[v.i:v.i+len(word)]) != word {
		return false
	}
	v.i += len(word)
	return true
}
