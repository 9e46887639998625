// records.mjs: typed identities, domain records, attempt ids and artifact documents
// (SPEC sections 3 and 4).
//
// Records arrive as CVs (canonical.mjs). `validateFields` applies section 4's field rules to
// an identity document; `identityInput` builds the hashed bytes of section 3; `readRecord`
// reads a `record_json` back (exact keys, field rules, matching "id").

import { createHash } from 'node:crypto';
import { Refused, encode, decode, MAX_INT, parseNs } from './canonical.mjs';

const IR = 'invalid_record';

export const RECORD_TYPES = {
  decision: ['candidate_id', 'problem_id', 'applicable', 'evidence'],
  run: ['decision_id', 'candidate_id', 'logical_spec_id', 'specification'],
  'attempt-slot': ['run_id', 'logical_slot', 'execution_kind', 'role', 'specification'],
  'observation-slot': ['run_id', 'logical_slot', 'kind', 'checkpoint_index', 'attempt_slot_id'],
  observation: ['slot_id', 'attempt_id', 'valid', 'completion', 'result'],
};

export const ARTIFACT_KINDS = ['attempt', 'observation', 'result', 'metrics', 'dataset', 'source', 'environment', 'other'];

export function sha256hex(buf) {
  return createHash('sha256').update(buf).digest('hex');
}

export function checkPlainString(value, name, limit = 256) {
  if (typeof value !== 'string') throw new Refused(IR, `${name} must be a string`);
  if (value.length === 0) throw new Refused(IR, `${name} must not be empty`);
  if (!value.isWellFormed()) throw new Refused(IR, `${name} holds a lone surrogate`);
  let count = 0;
  for (const ch of value) {
    const cp = ch.codePointAt(0);
    if (cp <= 0x1f || (cp >= 0x7f && cp <= 0x9f)) throw new Refused(IR, `${name} holds a control character`);
    count++;
  }
  if (count > limit) throw new Refused(IR, `${name} is longer than ${limit} code points`);
}

export function isTypedId(value, prefix) {
  return typeof value === 'string' && new RegExp(`^${prefix}:v1:[0-9a-f]{64}$`).test(value);
}

function checkTypedId(value, name, prefix) {
  if (!isTypedId(value, prefix)) throw new Refused(IR, `${name} must be an id of type ${prefix} (${prefix}:v1:<64 lowercase hex>)`);
}

function checkEnum(value, name, allowed) {
  if (typeof value !== 'string' || !allowed.includes(value)) {
    throw new Refused(IR, `${name} must be one of ${allowed.join(', ')}`);
  }
}

function checkBool(value, name) {
  if (value !== true && value !== false) throw new Refused(IR, `${name} must be a boolean`);
}

// An object field: a JSON object whose content canonical JSON can carry (else
// invalid_canonical_json / out_of_range). The identity input wraps the document in two more
// levels, so the field may nest at most 62 levels deep counting itself (section 4).
function checkObject(value, name) {
  if (!(value instanceof Map)) throw new Refused(IR, `${name} must be a JSON object`);
  encode(value, 2);
}

function checkExactKeys(map, expected, what) {
  if (!(map instanceof Map)) throw new Refused(IR, `${what} must be a JSON object`);
  for (const k of map.keys()) {
    if (!expected.includes(k)) throw new Refused(IR, `${what} has the unknown key ${JSON.stringify(k)}`);
  }
  for (const k of expected) {
    if (!map.has(k)) throw new Refused(IR, `${what} lacks the key ${JSON.stringify(k)}`);
  }
}

// Section 4's field rules for the identity document `doc` (a Map) of record type `type`.
export function validateFields(type, doc) {
  const fields = RECORD_TYPES[type];
  if (!fields) throw new Refused(IR, `unknown record type ${JSON.stringify(type)}`);
  checkExactKeys(doc, fields, `a ${type} identity document`);
  const f = (k) => doc.get(k);
  switch (type) {
    case 'decision':
      checkPlainString(f('candidate_id'), 'candidate_id');
      checkPlainString(f('problem_id'), 'problem_id');
      checkBool(f('applicable'), 'applicable');
      checkObject(f('evidence'), 'evidence');
      break;
    case 'run':
      checkTypedId(f('decision_id'), 'decision_id', 'decision');
      checkPlainString(f('candidate_id'), 'candidate_id');
      checkPlainString(f('logical_spec_id'), 'logical_spec_id');
      checkObject(f('specification'), 'specification');
      break;
    case 'attempt-slot':
      checkTypedId(f('run_id'), 'run_id', 'run');
      checkPlainString(f('logical_slot'), 'logical_slot');
      checkEnum(f('execution_kind'), 'execution_kind', ['one_shot', 'fresh_observation', 'stream']);
      checkEnum(f('role'), 'role', ['measurement', 'warmup']);
      checkObject(f('specification'), 'specification');
      break;
    case 'observation-slot': {
      checkTypedId(f('run_id'), 'run_id', 'run');
      checkPlainString(f('logical_slot'), 'logical_slot');
      checkEnum(f('kind'), 'kind', ['result', 'checkpoint']);
      const idx = f('checkpoint_index');
      if (f('kind') === 'result') {
        if (idx !== null) throw new Refused(IR, 'checkpoint_index must be null for a result slot');
      } else {
        if (typeof idx !== 'bigint') throw new Refused(IR, 'checkpoint_index must be an integer for a checkpoint slot');
        if (idx < 0n || idx > MAX_INT) throw new Refused('out_of_range', `checkpoint_index ${idx} outside 0..2^53-1`);
      }
      checkTypedId(f('attempt_slot_id'), 'attempt_slot_id', 'attempt-slot');
      break;
    }
    case 'observation':
      checkTypedId(f('slot_id'), 'slot_id', 'observation-slot');
      checkTypedId(f('attempt_id'), 'attempt_id', 'attempt');
      checkBool(f('valid'), 'valid');
      checkEnum(f('completion'), 'completion', ['reached', 'not_reached']);
      checkObject(f('result'), 'result');
      break;
    default:
      throw new Refused(IR, `unknown record type ${JSON.stringify(type)}`);
  }
}

// The hashed bytes of section 3: {"record": D, "type": prefix, "version": 1}, canonical.
export function identityInput(prefix, doc) {
  return encode(new Map([['record', doc], ['type', prefix], ['version', 1n]]));
}

export function typedId(prefix, doc) {
  const input = identityInput(prefix, doc);
  return { input, id: `${prefix}:v1:${sha256hex(input)}` };
}

// Building a record checks its fields in the order section 4 reads a record_json (18.2):
// first that canonical JSON can carry the whole document (a float anywhere, a boolean field
// included, a lone surrogate, a repeated key or excess depth is invalid_canonical_json, an
// integer outside ±(2^53-1) out_of_range), then its keys, then each field's rule.
export function recordIdentity(type, doc) {
  if (!Object.hasOwn(RECORD_TYPES, type)) throw new Refused(IR, `unknown record type ${JSON.stringify(type)}`);
  if (!(doc instanceof Map)) throw new Refused(IR, 'the fields must be a JSON object');
  encode(doc);
  validateFields(type, doc);
  const { input, id } = typedId(type, doc);
  const withId = new Map(doc);
  withId.set('id', id);
  return { input, id, recordJson: encode(withId) };
}

export function readRecord(type, bytes) {
  if (!Object.hasOwn(RECORD_TYPES, type)) throw new Refused(IR, `unknown record type ${JSON.stringify(type)}`);
  const map = decode(bytes);
  // A record_json is a canonical JSON *object*: other canonical JSON is refused as
  // invalid_canonical_json (identities.json records_refused "not an object").
  if (!(map instanceof Map)) throw new Refused('invalid_canonical_json', 'a record_json must be a canonical JSON object');
  checkExactKeys(map, [...RECORD_TYPES[type], 'id'], `a ${type} record_json`);
  // Section 4's order: keys and field rules first, then the "id" -- which is
  // identity_mismatch whenever it is not exactly the recomputed id, a non-string included.
  const stored = map.get('id');
  const doc = new Map(map);
  doc.delete('id');
  validateFields(type, doc);
  const { id } = typedId(type, doc);
  if (stored !== id) {
    const shown = typeof stored === 'string' ? stored : `a non-string ${JSON.stringify(String(stored))}`;
    throw new Refused('identity_mismatch', `stored id ${shown} differs from the recomputed ${id}`);
  }
  return id;
}

// run_attempt_id(slot_id, retry_index), section 3.
export function runAttemptId(slotId, retryIndex) {
  checkTypedId(slotId, 'slot_id', 'attempt-slot');
  if (typeof retryIndex !== 'bigint') throw new Refused(IR, 'retry_index must be an integer');
  if (retryIndex < 0n || retryIndex > MAX_INT) throw new Refused('out_of_range', `retry_index ${retryIndex} outside 0..2^53-1`);
  return typedId('attempt', new Map([['retry_index', retryIndex], ['slot_id', slotId]]));
}

// Artifact registration (section 4) -> storage id and document bytes. `fields` is the
// registration without "id" (18.2), or the whole document with it (identities.json
// `artifacts_refused`); a given "id" must be exactly the derived one (identity_mismatch).
export function artifactDocument(fields) {
  const keys = ['kind', 'path', 'content_sha256', 'manifest_sha256', 'verified_at_ns'];
  checkExactKeys(fields, fields instanceof Map && fields.has('id') ? [...keys, 'id'] : keys, 'an artifact registration');
  const kind = fields.get('kind');
  checkEnum(kind, 'kind', ARTIFACT_KINDS);
  for (const k of ['content_sha256', 'manifest_sha256']) {
    const v = fields.get(k);
    if (typeof v !== 'string' || !/^[0-9a-f]{64}$/.test(v)) throw new Refused(IR, `${k} must be 64 lowercase hex digits`);
  }
  const content = fields.get('content_sha256');
  const path = `artifacts/${kind}-${content}`;
  if (fields.get('path') !== path) throw new Refused(IR, `path must be exactly ${path}`);
  // A non-string is a wrong type (invalid_record); a string that is not a canonical
  // decimal is invalid_canonical_json, one above 2^63-1 out_of_range (section 2).
  const verified = fields.get('verified_at_ns');
  if (typeof verified !== 'string') throw new Refused(IR, 'verified_at_ns must be a decimal string');
  parseNs(verified);
  const id = `run-store-v1:${kind}-${content}`;
  if (fields.has('id') && fields.get('id') !== id) {
    throw new Refused('identity_mismatch', `the document's "id" is not the derived ${id}`);
  }
  const doc = new Map(fields);
  doc.set('id', id);
  return { id, document: encode(doc) };
}
