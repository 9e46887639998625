#!/usr/bin/env node
// runstore_values.mjs: a runstore driver (SPEC section 18) at level `values` (18.2), on
// Node's standard library alone. It reads JSON-lines requests on standard input and writes
// one response line per request on standard output; diagnostics go to standard error.
// Every operation of 18.2 is served; any other operation is answered `unsupported`. A line
// that is not a request (not JSON, not an object, no `args` object, an `op` that is not a
// string, nesting deeper than 512 levels) or a malformed argument is refused
// `invalid_record`, its `id` echoed as written (any JSON value; null when absent); an
// internal error is refused `run_store_error` (18.1). The driver never exits on input.
//
//   node impl/kit/js/runstore_values.mjs

import { parseWire, isWireObject, isWireNumber, WireError, MAX_WIRE_DEPTH } from './wire.mjs';
import {
  Refused, encode, decode, fromDescription, toDescription, fromWire, parseNs, formatNs, strictUtf8,
} from './canonical.mjs';
import { recordIdentity, readRecord, runAttemptId, artifactDocument } from './records.mjs';
import { treeHash, buildManifest, readManifest, checkName } from './content.mjs';
import { checkPayload } from './payload.mjs';

const IMPLEMENTATION = 'runstore-values-js 1';
const IR = 'invalid_record';

// ---- argument access ----

function arg(args, key) {
  if (!args.has(key)) throw new Refused(IR, `missing argument ${JSON.stringify(key)}`);
  return args.get(key);
}

function argString(args, key) {
  const v = arg(args, key);
  if (typeof v !== 'string') throw new Refused(IR, `argument ${JSON.stringify(key)} must be a string`);
  return v;
}

function argHex(args, key) {
  const v = argString(args, key);
  if (!/^(?:[0-9a-f]{2})*$/.test(v)) throw new Refused(IR, `argument ${JSON.stringify(key)} is not lowercase hex`);
  return Buffer.from(v, 'hex');
}

function hexOf(obj, key, what) {
  const v = isWireObject(obj) ? obj.get(key) : undefined;
  if (typeof v !== 'string' || !/^(?:[0-9a-f]{2})*$/.test(v)) throw new Refused(IR, `${what}.${key} must be lowercase hex`);
  return Buffer.from(v, 'hex');
}

// A path given as `path` (a JSON string, written as UTF-8) or `path_hex` (raw bytes).
// A string holding a lone surrogate has no UTF-8 form: it is refused with `badText`.
function pathOf(obj, what, badText) {
  if (!isWireObject(obj)) throw new Refused(IR, `${what} must be an object`);
  if (obj.has('path_hex')) return hexOf(obj, 'path_hex', what);
  const p = obj.get('path');
  if (typeof p !== 'string') throw new Refused(IR, `${what}.path must be a string`);
  if (!p.isWellFormed()) throw new Refused(badText, `${what}.path holds a lone surrogate: not UTF-8`);
  return Buffer.from(p, 'utf8');
}

// Entries of content.json (`tree_hashes`, `entries_refused`) or files of `manifests`.
function entriesOf(list, what, { filesOnly = false, badText = IR } = {}) {
  if (!Array.isArray(list)) throw new Refused(IR, `${what} must be an array`);
  return list.map((e, k) => {
    const name = `${what}[${k}]`;
    const path = pathOf(e, name, badText);
    const type = filesOnly ? 'file' : e.get('type');
    if (type === 'directory' || type === 'fifo') return { path, type };
    if (type === 'file') {
      const executable = e.get('executable');
      if (executable !== true && executable !== false) throw new Refused(IR, `${name}.executable must be a boolean`);
      return { path, type, data: hexOf(e, 'data_hex', name), executable };
    }
    if (type === 'symlink') {
      let target;
      if (e.has('target_hex')) target = hexOf(e, 'target_hex', name);
      else {
        const t = e.get('target');
        if (typeof t !== 'string' || !t.isWellFormed()) throw new Refused(IR, `${name}.target must be a UTF-8 string`);
        target = Buffer.from(t, 'utf8');
      }
      return { path, type, target };
    }
    throw new Refused(IR, `${name}.type ${JSON.stringify(type)} is not directory, file, symlink or fifo`);
  });
}

// A decimal integer argument: a string of decimal digits, optionally after `-` (18.1: an
// integer string that is not decimal, or a JSON number, is a malformed argument).
function argDecimal(args, key) {
  const v = arg(args, key);
  if (typeof v === 'string' && /^-?[0-9]+$/.test(v)) return BigInt(v);
  throw new Refused(IR, `argument ${JSON.stringify(key)} must be a decimal integer string`);
}

function argObject(args, key) {
  const v = arg(args, key);
  if (!isWireObject(v)) throw new Refused(IR, `argument ${JSON.stringify(key)} must be an object`);
  return fromWire(v);
}

// ---- operations (SPEC 18.2) ----

const OPS = {
  hello(args) {
    const p = args.get('protocol');
    if (!(isWireNumber(p) && p.int === 1n)) {
      const asked = isWireNumber(p) ? p.num : typeof p === 'string' ? JSON.stringify(p) : String(p);
      process.stderr.write(`hello asked for protocol ${asked}; this driver speaks 1\n`);
    }
    return { protocol: 1, implementation: IMPLEMENTATION };
  },
  'canonical.encode'(args) {
    return { canonical_hex: encode(fromDescription(arg(args, 'value'))).toString('hex') };
  },
  'canonical.decode'(args) {
    return { value: toDescription(decode(argHex(args, 'input_hex'))) };
  },
  'timestamp.parse'(args) {
    const text = strictUtf8(argHex(args, 'text_hex'));
    if (text === null) throw new Refused('invalid_canonical_json', 'the text is not UTF-8');
    return { ns: parseNs(text).toString() };
  },
  'timestamp.format'(args) {
    const ns = argDecimal(args, 'ns');
    return { text_hex: Buffer.from(formatNs(ns), 'utf8').toString('hex') };
  },
  'record.identity'(args) {
    const { input, id, recordJson } = recordIdentity(argString(args, 'type'), argObject(args, 'fields'));
    return { identity_input_hex: input.toString('hex'), id, record_json_hex: recordJson.toString('hex') };
  },
  'record.read'(args) {
    return { id: readRecord(argString(args, 'type'), argHex(args, 'record_json_hex')) };
  },
  'attempt.id'(args) {
    const slot = arg(args, 'slot_id');
    const { input, id } = runAttemptId(slot, argDecimal(args, 'retry_index'));
    return { identity_input_hex: input.toString('hex'), id };
  },
  'artifact.document'(args) {
    const { id, document } = artifactDocument(argObject(args, 'fields'));
    return { id, document_hex: document.toString('hex') };
  },
  'tree.hash'(args) {
    return { tree_sha256: treeHash(entriesOf(arg(args, 'entries'), 'entries')) };
  },
  'manifest.build'(args) {
    const files = entriesOf(arg(args, 'files'), 'files', { filesOnly: true, badText: 'unsafe_entry' });
    const { manifest, manifestSha256, treeSha256 } = buildManifest(files);
    return { manifest_hex: manifest.toString('hex'), manifest_sha256: manifestSha256, tree_sha256: treeSha256 };
  },
  'manifest.read'(args) {
    readManifest(argHex(args, 'manifest_hex'));
    return {};
  },
  'name.check'(args) {
    checkName(pathOf(args, 'args', 'unsafe_entry'));
    return {};
  },
  'payload.check'(args) {
    checkPayload(entriesOf(arg(args, 'entries'), 'entries', { badText: 'unsafe_entry' }));
    return {};
  },
};

// ---- transport (SPEC 18.1) ----

// The response's id is the request's, echoed exactly as it was written (any JSON value:
// 18.1 makes no demand on its type), or null when the line has none or is no object.
function respond(idRaw, body) {
  process.stdout.write(`{"id":${idRaw},${body}}\n`);
}

function refusal(code, message) {
  return `"refused":${JSON.stringify({ code, message })}`;
}

function handleLine(bytes) {
  let idRaw = 'null';
  try {
    const text = strictUtf8(bytes);
    if (text === null) throw new WireError('request line is not UTF-8');
    const { value: request, tooDeep } = parseWire(text);
    if (!isWireObject(request)) throw new WireError('request is not a JSON object');
    idRaw = request.rawText('id') ?? 'null';
    // A line that is not a request {"id": N, "op": "<name>", "args": {...}} is refused
    // invalid_record before its op is looked up (18.1): one nesting deeper than 512 levels,
    // an op that is not a string, args that are not an object.
    const op = request.get('op');
    const args = request.has('args') ? request.get('args') : null;
    let defect = null;
    if (tooDeep) defect = `request nests deeper than ${MAX_WIRE_DEPTH} levels`;
    else if (typeof op !== 'string') defect = 'request has no string "op"';
    else if (!isWireObject(args)) defect = 'request "args" is not an object';
    if (defect !== null) {
      respond(idRaw, refusal(IR, defect));
      return;
    }
    if (!Object.hasOwn(OPS, op)) {
      respond(idRaw, `"unsupported":${JSON.stringify(op)}`);
      return;
    }
    const result = OPS[op](args);
    respond(idRaw, `"result":${JSON.stringify(result)}`);
  } catch (err) {
    if (err instanceof Refused) respond(idRaw, refusal(err.code, err.message));
    else if (err instanceof WireError) {
      process.stderr.write(`malformed request: ${err.message}\n`);
      respond(idRaw, refusal(IR, `malformed request: ${err.message}`));
    } else {
      process.stderr.write(`internal error: ${err && err.stack ? err.stack : err}\n`);
      respond(idRaw, refusal('run_store_error', `internal error: ${err && err.message ? err.message : err}`));
    }
  }
}

let pending = Buffer.alloc(0);
process.stdin.on('data', (chunk) => {
  pending = Buffer.concat([pending, chunk]);
  let nl;
  while ((nl = pending.indexOf(0x0a)) !== -1) {
    const line = pending.subarray(0, nl);
    pending = pending.subarray(nl + 1);
    handleLine(line); // every line is answered, an empty one too (refused: not JSON)
  }
});
process.stdin.on('end', () => {
  if (pending.length) handleLine(pending);
  process.exitCode = 0;
});
process.stdout.on('error', () => process.exit(0));
