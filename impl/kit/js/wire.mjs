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
//
// A line may nest at most MAX_WIRE_DEPTH (512) levels, the outermost container being level
// 1 (SPEC 18.1). A container deeper than that is not built: it is scanned (iteratively, so
// any depth is safe) only to check that the line is JSON, and parseWire reports `tooDeep`,
// so the driver can still echo the request's id while refusing the line invalid_record.

export class WireError extends Error {}

export class WireObject {
  constructor() {
    this.pairs = [];
    this.duplicate = false;
    this.index = new Map();
    this.raw = new Map(); // key -> the member value's text as written (first occurrence)
  }
  add(key, value, raw = undefined) {
    if (this.index.has(key)) this.duplicate = true;
    else {
      this.index.set(key, value);
      if (raw !== undefined) this.raw.set(key, raw);
    }
    this.pairs.push([key, value]);
  }
  // The text of a member's value exactly as the line wrote it, or undefined.
  rawText(key) {
    return this.raw.get(key);
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

export const MAX_WIRE_DEPTH = 512;

// Stands for a container nested deeper than MAX_WIRE_DEPTH, which is never built.
export const TOO_DEEP = Object.freeze({ tooDeep: true });

export function isWireObject(v) {
  return v instanceof WireObject;
}

export function isWireNumber(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof WireObject);
}

// Parse one request line (a JavaScript string already decoded from strict UTF-8): returns
// {value, tooDeep}. A container below level MAX_WIRE_DEPTH is checked as JSON but replaced
// by TOO_DEEP, and tooDeep is then true.
export function parseWire(text) {
  let i = 0;
  let tooDeep = false;
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
  // `depth` counts the containers enclosing this value; a container here is level depth+1.
  const value = (depth) => {
    ws();
    if (i >= n) fail('unexpected end');
    const c = text[i];
    if ((c === '{' || c === '[') && depth + 1 > MAX_WIRE_DEPTH) {
      tooDeep = true;
      skipContainer();
      return TOO_DEEP;
    }
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
        ws();
        const start = i;
        const member = value(depth + 1);
        obj.add(key, member, text.slice(start, i));
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
    return scalar();
  };
  const scalar = () => {
    if (i >= n) fail('unexpected end');
    if (text[i] === '"') return string();
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
  // Check one container (at text[i]) and everything in it as JSON without building it,
  // with an explicit stack instead of recursion.
  const skipContainer = () => {
    const stack = [];
    const open = () => {
      // at '{' or '[': push it, or consume an empty container; returns true when pushed
      const c = text[i];
      i++;
      ws();
      if ((c === '{' && text[i] === '}') || (c === '[' && text[i] === ']')) {
        i++;
        return false;
      }
      stack.push(c);
      if (c === '{') key();
      return true;
    };
    const key = () => {
      ws();
      if (text[i] !== '"') fail('expected a key');
      string();
      ws();
      if (text[i] !== ':') fail("expected ':'");
      i++;
    };
    open();
    while (stack.length) {
      // read one value
      ws();
      if (i >= n) fail('unexpected end');
      if (text[i] === '{' || text[i] === '[') {
        if (open()) continue;
      } else scalar();
      // after a value: close containers or move to the next member
      for (;;) {
        ws();
        const top = stack[stack.length - 1];
        if (text[i] === ',') {
          i++;
          if (top === '{') key();
          break;
        }
        if ((top === '[' && text[i] === ']') || (top === '{' && text[i] === '}')) {
          i++;
          stack.pop();
          if (!stack.length) break;
          continue;
        }
        fail(top === '[' ? "expected ',' or ']'" : "expected ',' or '}'");
      }
    }
  };
  const v = value(0);
  ws();
  if (i !== n) fail('trailing data');
  return { value: v, tooDeep };
}
