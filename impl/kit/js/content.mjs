// content.mjs: completed-object formats (SPEC section 12): entry names (12.1), the
// version-1 completion manifest (12.2) and the version-1 local-tree hash (12.3), as pure
// functions over byte paths. Paths are Buffers of their raw UTF-8 (or non-UTF-8) bytes.

import { createHash } from 'node:crypto';
import { Refused, encode, decode, strictUtf8, MAX_INT } from './canonical.mjs';

const UE = 'unsafe_entry';
const MEDIA_TYPE = 'application/octet-stream';

function u32(n) {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

function u64(n) {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return b;
}

function lengthPrefixed(buf) {
  return Buffer.concat([u64(buf.length), buf]);
}

// The reason a path (Buffer) breaks the 12.1 name rules, or null when it satisfies them.
export function nameProblem(pathBytes) {
  const text = strictUtf8(pathBytes);
  if (text === null) return 'name is not UTF-8';
  if (text.normalize('NFC') !== text) return 'name is not in Unicode NFC';
  if (text.includes('\\')) return 'name holds a backslash';
  for (const ch of text) {
    const cp = ch.codePointAt(0);
    if (cp <= 0x1f || (cp >= 0x7f && cp <= 0x9f)) return 'name holds a control character';
  }
  for (const seg of text.split('/')) {
    if (seg === '') return 'path has an empty segment (leading, trailing or doubled /)';
    if (seg === '.' || seg === '..') return `path has a ${JSON.stringify(seg)} segment`;
    if (Buffer.byteLength(seg, 'utf8') > 255) return 'a segment is longer than 255 UTF-8 bytes';
  }
  return null;
}

export function checkName(pathBytes) {
  const problem = nameProblem(pathBytes);
  if (problem !== null) throw new Refused(UE, `${describePath(pathBytes)}: ${problem}`);
}

export function describePath(pathBytes) {
  const t = strictUtf8(pathBytes);
  return t === null ? `path bytes ${pathBytes.toString('hex')}` : JSON.stringify(t);
}

// Tree entries: {path: Buffer, type: 'directory'|'file'|'symlink', data?: Buffer,
// executable?: bool, target?: Buffer}. Parents missing from the list are implied as
// directories (a manifest's file list, 12.2; not `tree.hash`, which needs every directory
// listed); a path listed twice, or a parent that is not a directory, is refused.
export function completeTree(entries, code = 'invalid_record') {
  const byPath = new Map();
  for (const e of entries) {
    const key = e.path.toString('hex');
    if (byPath.has(key)) throw new Refused(code, `${describePath(e.path)} is listed twice`);
    byPath.set(key, e);
  }
  for (const e of [...byPath.values()]) {
    let end = e.path.lastIndexOf(0x2f);
    while (end > 0) {
      const parent = e.path.subarray(0, end);
      const existing = byPath.get(parent.toString('hex'));
      if (existing === undefined) byPath.set(parent.toString('hex'), { path: Buffer.from(parent), type: 'directory' });
      else if (existing.type !== 'directory') {
        throw new Refused(code, `${describePath(parent)} is a ${existing.type} and the parent of ${describePath(e.path)}`);
      }
      end = parent.lastIndexOf(0x2f);
    }
  }
  return [...byPath.values()];
}

// A tree given to the hash lists every entry itself (18.2, `tree.hash`): a path that is
// not normalized (12.1: empty, leading, trailing or doubled `/`, a `.` or `..` segment), a
// repeated path, or one whose parent directory is not listed or is a file or link is
// invalid_record. No parent is implied.
export function checkTreeListing(entries) {
  const byPath = new Map();
  for (const e of entries) {
    if (e.path.length === 0) throw new Refused('invalid_record', 'an entry path is empty');
    for (const seg of e.path.toString('latin1').split('/')) {
      if (seg === '' || seg === '.' || seg === '..') {
        throw new Refused('invalid_record', `${describePath(e.path)} is not a normalized relative path`);
      }
    }
    const key = e.path.toString('hex');
    if (byPath.has(key)) throw new Refused('invalid_record', `${describePath(e.path)} is listed twice`);
    byPath.set(key, e);
  }
  for (const e of entries) {
    const end = e.path.lastIndexOf(0x2f);
    if (end <= 0) continue;
    const parent = e.path.subarray(0, end);
    const listed = byPath.get(parent.toString('hex'));
    if (listed === undefined) {
      throw new Refused('invalid_record', `${describePath(e.path)}: its parent directory ${describePath(parent)} is not listed`);
    }
    if (listed.type !== 'directory') {
      throw new Refused('invalid_record', `${describePath(e.path)} is below ${describePath(parent)}, a ${listed.type}`);
    }
  }
}

// The version-1 local-tree hash (12.3) of a tree given as a complete listing (`tree.hash`).
export function treeHash(entries) {
  checkTreeListing(entries);
  return hashListing(entries);
}

// The transcript of 12.3 over entries that list every descendant of the root exactly once.
function hashListing(entries) {
  const all = [...entries].sort((a, b) => Buffer.compare(a.path, b.path));
  const h = createHash('sha256');
  h.update(Buffer.from('metewand-local-tree\0', 'latin1'));
  h.update(u32(1));
  h.update(u64(all.length));
  for (const e of all) {
    h.update(lengthPrefixed(e.path));
    if (e.type === 'directory') h.update(Buffer.from('d'));
    else if (e.type === 'file') {
      h.update(Buffer.from('f'));
      h.update(Buffer.from([e.executable ? 1 : 0]));
      h.update(u64(e.data.length));
      h.update(e.data);
    } else if (e.type === 'symlink') {
      h.update(Buffer.from('l'));
      h.update(lengthPrefixed(e.target));
    } else {
      throw new Refused(UE, `${describePath(e.path)} is a special file (${e.type}), which has no transcript`);
    }
  }
  return h.digest('hex');
}

// The first segment of a path, as text: the name of its root entry.
function rootSegment(pathBytes) {
  return pathBytes.toString('utf8').split('/')[0];
}

// manifest_bytes of 12.2 for files [{path: Buffer, data: Buffer, executable}] of a payload.
export function buildManifest(files) {
  const seen = new Set();
  for (const f of files) {
    checkName(f.path);
    if (rootSegment(f.path) === 'manifest.json') {
      throw new Refused(UE, `${describePath(f.path)}: "manifest.json" at the root is runtime-owned, whatever its type`);
    }
    const key = f.path.toString('hex');
    if (seen.has(key)) throw new Refused(UE, `${describePath(f.path)} is listed twice`);
    seen.add(key);
  }
  completeTree(files.map((f) => ({ ...f, type: 'file' })), UE); // a file cannot also be a parent
  const sorted = [...files].sort((a, b) => Buffer.compare(a.path, b.path));
  const list = sorted.map((f) => {
    if (BigInt(f.data.length) > MAX_INT) throw new Refused('out_of_range', `${describePath(f.path)} is too large to list`);
    return new Map([
      ['media_type', MEDIA_TYPE],
      ['path', f.path.toString('utf8')],
      ['sha256', createHash('sha256').update(f.data).digest('hex')],
      ['size_bytes', BigInt(f.data.length)],
    ]);
  });
  const manifest = encode(new Map([['complete', true], ['files', list], ['schema_version', 1n]]));
  const object = [
    ...files.map((f) => ({ path: f.path, type: 'file', data: f.data, executable: f.executable })),
    { path: Buffer.from('manifest.json'), type: 'file', data: manifest, executable: false },
  ];
  return {
    manifest,
    manifestSha256: createHash('sha256').update(manifest).digest('hex'),
    treeSha256: hashListing(completeTree(object, UE)), // the payload's directories are implied
  };
}

// Strict reading of a version-1 manifest (12.2): every other input is artifact_corrupt.
export function readManifest(bytes) {
  const corrupt = (why) => new Refused('artifact_corrupt', `manifest.json: ${why}`);
  let doc;
  try {
    doc = decode(bytes);
  } catch (e) {
    if (e instanceof Refused) throw corrupt(`not canonical JSON (${e.code}: ${e.message})`);
    throw e;
  }
  const exactKeys = (map, keys, what) => {
    if (!(map instanceof Map)) throw corrupt(`${what} is not an object`);
    for (const k of map.keys()) if (!keys.includes(k)) throw corrupt(`${what} has the unknown key ${JSON.stringify(k)}`);
    for (const k of keys) if (!map.has(k)) throw corrupt(`${what} lacks the key ${JSON.stringify(k)}`);
  };
  exactKeys(doc, ['complete', 'files', 'schema_version'], 'the manifest');
  if (doc.get('schema_version') !== 1n) throw corrupt('schema_version is not the integer 1');
  if (doc.get('complete') !== true) throw corrupt('complete is not true');
  const files = doc.get('files');
  if (!Array.isArray(files)) throw corrupt('files is not an array');
  let prev = null;
  const entries = [];
  files.forEach((f, k) => {
    const what = `files[${k}]`;
    exactKeys(f, ['media_type', 'path', 'sha256', 'size_bytes'], what);
    if (f.get('media_type') !== MEDIA_TYPE) throw corrupt(`${what}.media_type is not ${MEDIA_TYPE}`);
    const path = f.get('path');
    if (typeof path !== 'string') throw corrupt(`${what}.path is not a string`);
    const pb = Buffer.from(path, 'utf8');
    const problem = nameProblem(pb);
    if (problem !== null) throw corrupt(`${what}.path ${JSON.stringify(path)}: ${problem}`);
    // No writer lists manifest.json, nor a file below a root directory of that name
    // (publication refuses a caller's root `manifest.json` whatever its type, 12.1).
    if (rootSegment(pb) === 'manifest.json') throw corrupt(`${what} lists manifest.json or a path below it`);
    if (prev !== null) {
      const cmp = Buffer.compare(prev, pb);
      if (cmp === 0) throw corrupt(`${what}.path ${JSON.stringify(path)} is repeated`);
      if (cmp > 0) throw corrupt(`${what}.path ${JSON.stringify(path)} is out of order`);
    }
    prev = pb;
    const sha = f.get('sha256');
    if (typeof sha !== 'string' || !/^[0-9a-f]{64}$/.test(sha)) throw corrupt(`${what}.sha256 is not 64 lowercase hex digits`);
    const size = f.get('size_bytes');
    if (typeof size !== 'bigint' || size < 0n || size > MAX_INT) throw corrupt(`${what}.size_bytes is not an integer in 0..2^53-1`);
    entries.push({ path: pb, type: 'file' });
  });
  try {
    completeTree(entries, 'artifact_corrupt');
  } catch (e) {
    throw corrupt(e.message);
  }
  return doc;
}
