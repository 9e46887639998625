// canonical.mjs: canonical JSON version 1 (SPEC section 2) and its value descriptions.
//
// A canonical value ("CV") in this driver is one of: null, true, false, a BigInt, a
// JavaScript string, an Array of CVs, or a Map from string keys to CVs (plain wire JSON may
// also hold a WireFloat, which never encodes). This module encodes CVs to canonical bytes,
// decodes bytes canonically (refusing everything else), converts the value descriptions of
// vectors/README.md and plain wire JSON to CVs and back, and reads and writes the decimal
// `*_ns` strings of "Timestamps in JSON".

import { isWireObject, isWireNumber } from './wire.mjs';

export class Refused extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

export const MAX_INT = (1n << 53n) - 1n;
export const MIN_INT = -MAX_INT;
export const MAX_NS = (1n << 63n) - 1n;
export const MAX_DEPTH = 64;

const ICJ = 'invalid_canonical_json';
const utf8Strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

export function strictUtf8(buf) {
  try {
    return utf8Strict.decode(buf);
  } catch {
    return null;
  }
}

// Compare two well-formed strings by code point (= by their UTF-8 bytes).
export function compareCodePoints(a, b) {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

function encodeString(s, parts) {
  if (!s.isWellFormed()) throw new Refused(ICJ, 'string holds a lone surrogate');
  let out = '"';
  for (let k = 0; k < s.length; k++) {
    const c = s.charCodeAt(k);
    if (c === 0x22) out += '\\"';
    else if (c === 0x5c) out += '\\\\';
    else if (c === 0x08) out += '\\b';
    else if (c === 0x0c) out += '\\f';
    else if (c === 0x0a) out += '\\n';
    else if (c === 0x0d) out += '\\r';
    else if (c === 0x09) out += '\\t';
    else if (c < 0x20) out += '\\u00' + c.toString(16).padStart(2, '0');
    else out += s[k];
  }
  parts.push(Buffer.from(out + '"', 'utf8'));
}

function encodeInto(v, depth, parts) {
  if (v === null) parts.push(Buffer.from('null'));
  else if (v === true) parts.push(Buffer.from('true'));
  else if (v === false) parts.push(Buffer.from('false'));
  else if (typeof v === 'bigint') {
    if (v > MAX_INT || v < MIN_INT) throw new Refused('out_of_range', `integer ${v} outside ±(2^53-1)`);
    parts.push(Buffer.from(v.toString()));
  } else if (typeof v === 'string') encodeString(v, parts);
  else if (v instanceof CodePointString) throw new Refused(ICJ, 'string holds a lone surrogate');
  else if (Array.isArray(v)) {
    if (depth + 1 > MAX_DEPTH) throw new Refused(ICJ, 'nesting deeper than 64');
    parts.push(Buffer.from('['));
    v.forEach((item, k) => {
      if (k) parts.push(Buffer.from(','));
      encodeInto(item, depth + 1, parts);
    });
    parts.push(Buffer.from(']'));
  } else if (v instanceof Map) {
    if (depth + 1 > MAX_DEPTH) throw new Refused(ICJ, 'nesting deeper than 64');
    const members = [];
    for (const [key, value] of v) {
      if (key instanceof CodePointString) throw new Refused(ICJ, 'object key holds a lone surrogate');
      if (typeof key !== 'string') throw new Refused(ICJ, 'object key is not a string');
      if (!key.isWellFormed()) throw new Refused(ICJ, 'object key holds a lone surrogate');
      members.push([Buffer.from(key, 'utf8'), key, value]);
    }
    members.sort((a, b) => Buffer.compare(a[0], b[0]));
    parts.push(Buffer.from('{'));
    members.forEach(([, key, value], k) => {
      if (k) parts.push(Buffer.from(','));
      encodeString(key, parts);
      parts.push(Buffer.from(':'));
      encodeInto(value, depth + 1, parts);
    });
    parts.push(Buffer.from('}'));
  } else if (v instanceof WireFloat) throw new Refused(ICJ, `floating-point number ${v.text} has no canonical form`);
  else throw new Refused(ICJ, `cannot encode a value of type ${typeof v}`);
}

// `outerDepth` counts containers the value will sit inside (their depth counts too).
export function encode(v, outerDepth = 0) {
  const parts = [];
  encodeInto(v, outerDepth, parts);
  return Buffer.concat(parts);
}

// Decode bytes that must be exactly the canonical encoding of the value they denote.
export function decode(buf) {
  const text = strictUtf8(buf);
  if (text === null) throw new Refused(ICJ, 'input is not valid UTF-8');
  let i = 0;
  const n = text.length;
  const fail = (what) => {
    throw new Refused(ICJ, `not canonical JSON at character ${i}: ${what}`);
  };
  const str = () => {
    i++;
    let out = '';
    for (;;) {
      if (i >= n) fail('unterminated string');
      const c = text.charCodeAt(i);
      if (c === 0x22) {
        i++;
        return out;
      }
      if (c < 0x20) fail('raw control character in a string');
      if (c !== 0x5c) {
        out += text[i++];
        continue;
      }
      const e = text[i + 1];
      const short = { '"': '"', '\\': '\\', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
      if (e !== undefined && Object.hasOwn(short, e)) {
        out += short[e];
        i += 2;
        continue;
      }
      if (e === 'u') {
        const h = text.slice(i + 2, i + 6);
        if (!/^00[01][0-9a-f]$/.test(h)) fail(`escape \\u${h} is not canonical`);
        const cp = parseInt(h, 16);
        if ([0x08, 0x09, 0x0a, 0x0c, 0x0d].includes(cp)) fail(`escape \\u${h} has a short form`);
        out += String.fromCharCode(cp);
        i += 6;
        continue;
      }
      fail('escape is not canonical');
    }
  };
  const val = (depth) => {
    if (i >= n) fail('unexpected end');
    const c = text[i];
    if (c === '[' || c === '{') {
      if (depth + 1 > MAX_DEPTH) fail('nesting deeper than 64');
    }
    if (c === '[') {
      i++;
      const arr = [];
      if (text[i] === ']') {
        i++;
        return arr;
      }
      for (;;) {
        arr.push(val(depth + 1));
        if (text[i] === ',') i++;
        else if (text[i] === ']') {
          i++;
          return arr;
        } else fail("expected ',' or ']'");
      }
    }
    if (c === '{') {
      i++;
      const map = new Map();
      if (text[i] === '}') {
        i++;
        return map;
      }
      let prev = null;
      for (;;) {
        if (text[i] !== '"') fail('expected a string key');
        const key = str();
        const kb = Buffer.from(key, 'utf8');
        if (prev !== null) {
          const cmp = Buffer.compare(prev, kb);
          if (cmp === 0) fail('duplicate key');
          if (cmp > 0) fail('keys not sorted by code point');
        }
        prev = kb;
        if (text[i] !== ':') fail("expected ':'");
        i++;
        map.set(key, val(depth + 1));
        if (text[i] === ',') i++;
        else if (text[i] === '}') {
          i++;
          return map;
        } else fail("expected ',' or '}'");
      }
    }
    if (c === '"') return str();
    for (const [lit, v] of [['null', null], ['true', true], ['false', false]]) {
      if (text.startsWith(lit, i)) {
        i += lit.length;
        return v;
      }
    }
    let j = i;
    if (text[j] === '-') j++;
    const digitStart = j;
    while (j < n && text.charCodeAt(j) >= 0x30 && text.charCodeAt(j) <= 0x39) j++;
    if (j === digitStart) fail('unexpected character');
    const lit = text.slice(i, j);
    const digits = lit.startsWith('-') ? lit.slice(1) : lit;
    if (digits.length > 1 && digits[0] === '0') fail('leading zero');
    if (lit === '-0') fail('negative zero');
    i += lit.length;
    if (i < n && (text[i] === '.' || text[i] === 'e' || text[i] === 'E')) fail('fraction or exponent');
    const v = BigInt(lit);
    if (v > MAX_INT || v < MIN_INT) {
      const shown = lit.length > 40 ? `${lit.slice(0, 20)}... (${lit.length} characters)` : lit;
      throw new Refused('out_of_range', `integer ${shown} outside ±(2^53-1)`);
    }
    return v;
  };
  const v = val(0);
  if (i !== n) fail('trailing bytes');
  return v;
}

// ---- value descriptions (vectors/README.md "Value descriptions") ----
//
// A description's shape is checked, whole, before its value (SPEC 18.1). A description that
// is not one (unknown tag or arity, wrong element types, hex that is not lowercase hex or
// whose bytes are not UTF-8, an integer string that is not decimal, a code point outside
// 0..0x10FFFF, a float text that is not a decimal literal, NaN, Infinity or -Infinity, a
// member that is not a pair, an object description that repeats a key) is a malformed
// argument: invalid_record, even where the value would also be one canonical JSON refuses.
// A well-formed description becomes a CV that may hold what canonical JSON cannot carry (a
// WireFloat, a CodePointString with a surrogate, a non-string Map key, excess depth): the
// encoder refuses those, in its own traversal order, with invalid_canonical_json (and an
// integer outside ±(2^53-1) with out_of_range).

function hexBytes(h, what) {
  if (typeof h !== 'string' || !/^(?:[0-9a-f]{2})*$/.test(h)) throw new Refused('invalid_record', `${what} is not lowercase hex`);
  return Buffer.from(h, 'hex');
}

const FLOAT_TEXT = /^(?:-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|NaN|Infinity|-Infinity)$/;

function malformed(what) {
  return new Refused('invalid_record', `malformed value description: ${what}`);
}

// A string given by code points that include a surrogate (U+D800..U+DFFF): never encodable
// (section 2: a high surrogate followed by a low one is two lone surrogates). It is kept as
// code points because, appended to a JavaScript string, such a pair would join into one
// valid astral character.
export class CodePointString {
  constructor(codePoints) {
    this.codePoints = codePoints;
  }
}

export function fromDescription(d) {
  return describe(d);
}

// What a (well-formed) description denotes, as a comparable key: two key descriptions
// repeat a key exactly when these are equal. Strings compare by code points (either
// spelling), integers by value, booleans apart from integers, floats by numeric value apart
// from integers (NaN never equals anything), arrays by elements, objects as member sets.
let nanCount = 0;
function valueKey(d) {
  switch (d[0]) {
    case 'null':
      return ['null'];
    case 'bool':
      return ['bool', d[1]];
    case 'int':
      return ['int', BigInt(d[1]).toString()];
    case 'string':
      return ['str', [...strictUtf8(Buffer.from(d[1], 'hex'))].map((c) => c.codePointAt(0))];
    case 'string_code_points':
      return ['str', d[1].map((c) => Number(c.int))];
    case 'float': {
      const x = Number(d[1]);
      if (Number.isNaN(x)) return ['nan', nanCount++];
      return ['float', x === 0 ? '0' : String(x)];
    }
    case 'array':
      return ['array', ...d.slice(1).map(valueKey)];
    default: // object
      return ['object', ...d.slice(1).map(([k, v]) => JSON.stringify([valueKey(k), valueKey(v)])).sort()];
  }
}

function describe(d) {
  if (!Array.isArray(d) || d.length === 0 || typeof d[0] !== 'string') throw malformed('not a tagged array');
  const tag = d[0];
  if (tag === 'null' && d.length === 1) return null;
  if (tag === 'bool' && d.length === 2 && typeof d[1] === 'boolean') return d[1];
  if (tag === 'int' && d.length === 2) {
    if (typeof d[1] !== 'string' || !/^-?[0-9]+$/.test(d[1])) throw malformed('["int", ...] needs a decimal string');
    return BigInt(d[1]);
  }
  if (tag === 'string' && d.length === 2) {
    const s = strictUtf8(hexBytes(d[1], 'string description'));
    if (s === null) throw malformed('["string", ...] bytes are not UTF-8');
    return s;
  }
  if (tag === 'string_code_points' && d.length === 2 && Array.isArray(d[1])) {
    const cps = d[1].map((cp) => {
      if (!isWireNumber(cp) || cp.int === null || cp.int < 0n || cp.int > 0x10ffffn) {
        throw malformed('a code point is not an integer in 0..0x10FFFF');
      }
      return Number(cp.int);
    });
    if (cps.some((cp) => cp >= 0xd800 && cp <= 0xdfff)) return new CodePointString(cps);
    let s = '';
    for (const cp of cps) s += String.fromCodePoint(cp);
    return s;
  }
  if (tag === 'float' && d.length === 2) {
    if (typeof d[1] !== 'string' || !FLOAT_TEXT.test(d[1])) throw malformed('["float", ...] needs a decimal literal, NaN, Infinity or -Infinity');
    return new WireFloat(d[1]);
  }
  if (tag === 'array') return d.slice(1).map(describe);
  if (tag === 'object') {
    const map = new Map();
    const seen = new Set();
    for (const member of d.slice(1)) {
      if (!Array.isArray(member) || member.length !== 2) throw malformed('an object member is not a [key, value] pair');
      const key = describe(member[0]);
      const value = describe(member[1]);
      const id = JSON.stringify(valueKey(member[0]));
      if (seen.has(id)) throw malformed('an object description repeats a key');
      seen.add(id);
      map.set(key, value); // keys of other kinds stay in the Map for the encoder to refuse
    }
    return map;
  }
  throw malformed(`unknown tag or wrong arity (tag ${JSON.stringify(tag)})`);
}

export function toDescription(v) {
  if (v === null) return ['null'];
  if (v === true || v === false) return ['bool', v];
  if (typeof v === 'bigint') return ['int', v.toString()];
  if (typeof v === 'string') return ['string', Buffer.from(v, 'utf8').toString('hex')];
  if (Array.isArray(v)) return ['array', ...v.map(toDescription)];
  return ['object', ...[...v].map(([k, x]) => [toDescription(k), toDescription(x)])];
}

// A JSON number with a fraction or exponent in plain wire JSON: kept as a value of its own
// so that a typed field holding one is a wrong type (invalid_record, section 4) and
// content holding one cannot be encoded (invalid_canonical_json, section 2).
export class WireFloat {
  constructor(text) {
    this.text = text;
  }
}

// Plain wire JSON (records' fields, evidence, ...) to a CV (plus WireFloat).
export function fromWire(w) {
  if (w === null || w === true || w === false || typeof w === 'string') return w;
  if (Array.isArray(w)) return w.map(fromWire);
  if (isWireObject(w)) {
    if (w.duplicate) throw new Refused(ICJ, 'duplicate object key');
    const map = new Map();
    for (const [k, x] of w.pairs) map.set(k, fromWire(x));
    return map;
  }
  if (isWireNumber(w)) return w.int === null ? new WireFloat(w.num) : w.int;
  throw new Refused(ICJ, 'unknown wire value');
}

// ---- `*_ns` decimal strings ----

export function parseNs(text, badCode = ICJ) {
  if (typeof text !== 'string' || !/^(0|[1-9][0-9]*)$/.test(text)) {
    throw new Refused(badCode, `${JSON.stringify(text)} is not a canonical *_ns decimal string`);
  }
  const v = BigInt(text);
  if (v > MAX_NS) throw new Refused('out_of_range', `*_ns value ${text} above 2^63-1`);
  return v;
}

export function formatNs(v) {
  if (typeof v !== 'bigint' || v < 0n || v > MAX_NS) throw new Refused('out_of_range', `*_ns value ${v} outside 0..2^63-1`);
  return v.toString();
}

export { hexBytes };
