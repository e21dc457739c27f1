// Exact JSON display. A job's payload is delivered byte for byte, so an
// integer above 2^53 must also be shown as sent: JSON.parse would round it.
// These helpers work on the raw response text instead of parsed values.

const WS = ' \t\n\r';

function skipWs(s, i) {
  while (i < s.length && WS.includes(s[i])) i++;
  return i;
}

// skipString returns the index just past the string starting at s[i] === '"'.
function skipString(s, i) {
  for (i++; i < s.length; i++) {
    if (s[i] === '\\') i++;
    else if (s[i] === '"') return i + 1;
  }
  throw new SyntaxError('unterminated string');
}

// skipValue returns the index just past the value starting at or after i.
function skipValue(s, i) {
  i = skipWs(s, i);
  const c = s[i];
  if (c === '"') return skipString(s, i);
  if (c === '{' || c === '[') {
    let depth = 0;
    while (i < s.length) {
      const d = s[i];
      if (d === '"') { i = skipString(s, i); continue; }
      if (d === '{' || d === '[') depth++;
      else if (d === '}' || d === ']') {
        depth--;
        if (depth === 0) return i + 1;
      }
      i++;
    }
    throw new SyntaxError('unterminated container');
  }
  while (i < s.length && !(',}]' + WS).includes(s[i])) i++;
  return i;
}

/** rawMember returns the exact text of a top-level member of a JSON object, or null. */
export function rawMember(text, key) {
  try {
    let i = skipWs(text, 0);
    if (text[i] !== '{') return null;
    i++;
    for (;;) {
      i = skipWs(text, i);
      if (text[i] !== '"') return null;
      const start = i;
      i = skipString(text, i);
      const name = JSON.parse(text.slice(start, i));
      i = skipWs(text, i);
      if (text[i] !== ':') return null;
      const vs = skipWs(text, i + 1);
      i = skipValue(text, vs);
      if (name === key) return text.slice(vs, i);
      i = skipWs(text, i);
      if (text[i] !== ',') return null;
      i++;
    }
  } catch {
    return null;
  }
}

// Go's encoder writes <, > and & in strings as \u003c, \u003e, \u0026; they
// mean the same characters, and read better as themselves.
const HTML_ESCAPES = {'\\u003c': '<', '\\u003e': '>', '\\u0026': '&'};

function readableString(tok) {
  let out = '';
  for (let i = 0; i < tok.length; i++) {
    if (tok[i] === '\\') {
      const esc = tok.slice(i, i + 6);
      if (HTML_ESCAPES[esc]) { out += HTML_ESCAPES[esc]; i += 5; continue; }
      out += tok.slice(i, i + 2);
      i++;
      continue;
    }
    out += tok[i];
  }
  return out;
}

/** pretty indents JSON text without parsing it, so every literal stays as written. */
export function pretty(raw, indent = '  ') {
  let out = '';
  let depth = 0;
  const nl = () => '\n' + indent.repeat(depth);
  for (let i = 0; i < raw.length;) {
    const c = raw[i];
    if (c === '"') {
      const j = skipString(raw, i);
      out += readableString(raw.slice(i, j));
      i = j;
    } else if (WS.includes(c)) {
      i++;
    } else if (c === '{' || c === '[') {
      const j = skipWs(raw, i + 1);
      if (raw[j] === (c === '{' ? '}' : ']')) {
        out += c + raw[j];
        i = j + 1;
      } else {
        depth++;
        out += c + nl();
        i++;
      }
    } else if (c === '}' || c === ']') {
      depth--;
      out += nl() + c;
      i++;
    } else if (c === ',') {
      out += ',' + nl();
      i++;
    } else if (c === ':') {
      out += ': ';
      i++;
    } else {
      out += c;
      i++;
    }
  }
  return out;
}
