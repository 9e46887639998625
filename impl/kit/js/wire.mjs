// wire.mjs: the driver's own RFC 8259 reader for request lines (SPEC 18.1).
//
// JSON.parse is not used because it loses what the value level must see: it turns `1.0`
// into `1`, big integers into doubles, and keeps the last of duplicate keys. This reader
// returns a "wire tree":
//   null, true, false               as themselves
//   numbers                         {num: "<literal>", int: BigInt | null}
//   strings                         JavaScript strings (lone surrogates kept, from \u escapes)
//   arrays                          JavaScript arrays
//   objects                         WireObject: ordered [key, value] pairs plus duplicate flag
// Errors are thrown as WireError; the driver answers them as malformed requests.

export class WireError extends Error {}

export class WireObject {
  constructor() {
    this.pairs = [];
    this.duplicate = false;
    this.index = new Map();
  }
  add(key, value) {
    if (this.index.has(key)) this.duplicate = true;
    else this.index.set(key, value);
    this.pairs.push([key, value]);
  }
  has(key) {
    return this.index.has(key);
  }
  get(key) {
    return this.index.get(key);
  }
  keys() {
    return [...this.index.keys()];
  }
}

const MAX_WIRE_DEPTH = 4096;

export function isWireObject(v) {
  return v instanceof WireObject;
}

export function isWireNumber(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof WireObject);
}

// Parse one request line (a JavaScript string already decoded from strict UTF-8).
export function parseWire(text) {
  let i = 0;
  const n = text.length;
  const ws = () => {
    while (i < n) {
      const c = text.charCodeAt(i);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) i++;
      else break;
    }
  };
  const fail = (what) => {
    throw new WireError(`malformed JSON at offset ${i}: ${what}`);
  };
  const value = (depth) => {
    if (depth > MAX_WIRE_DEPTH) fail('nesting too deep');
    ws();
    if (i >= n) fail('unexpected end');
    const c = text[i];
    if (c === '{') {
      i++;
      const obj = new WireObject();
      ws();
      if (text[i] === '}') {
        i++;
        return obj;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail('expected a key');
        const key = string();
        ws();
        if (text[i] !== ':') fail("expected ':'");
        i++;
        obj.add(key, value(depth + 1));
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === '}') {
          i++;
          return obj;
        }
        fail("expected ',' or '}'");
      }
    }
    if (c === '[') {
      i++;
      const arr = [];
      ws();
      if (text[i] === ']') {
        i++;
        return arr;
      }
      for (;;) {
        arr.push(value(depth + 1));
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === ']') {
          i++;
          return arr;
        }
        fail("expected ',' or ']'");
      }
    }
    if (c === '"') return string();
    if (text.startsWith('null', i)) {
      i += 4;
      return null;
    }
    if (text.startsWith('true', i)) {
      i += 4;
      return true;
    }
    if (text.startsWith('false', i)) {
      i += 5;
      return false;
    }
    const m = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(text.slice(i, i + 4096));
    if (!m || m[0].length === 0 || m[0] === '-') fail('unexpected character');
    if (m[0].length >= 4096) fail('number literal too long');
    i += m[0].length;
    const isInt = m[2] === undefined && m[3] === undefined;
    return { num: m[0], int: isInt ? BigInt(m[0]) : null };
  };
  const string = () => {
    i++; // opening quote
    let out = '';
    for (;;) {
      if (i >= n) fail('unterminated string');
      const c = text.charCodeAt(i);
      if (c === 0x22) {
        i++;
        return out;
      }
      if (c < 0x20) fail('raw control character in string');
      if (c === 0x5c) {
        const e = text[i + 1];
        const simple = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
        if (e in simple) {
          out += simple[e];
          i += 2;
          continue;
        }
        if (e === 'u') {
          const h = text.slice(i + 2, i + 6);
          if (!/^[0-9a-fA-F]{4}$/.test(h)) fail('bad \\u escape');
          out += String.fromCharCode(parseInt(h, 16));
          i += 6;
          continue;
        }
        fail('bad escape');
      }
      out += text[i];
      i++;
    }
  };
  const v = value(0);
  ws();
  if (i !== n) fail('trailing data');
  return v;
}
