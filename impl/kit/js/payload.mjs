// payload.mjs: the publication scan of a payload directory (SPEC sections 11 and 12.1),
// run on a real directory: `payload.check` creates the described entries, in order (a
// file's missing parents with it), under a fresh private directory, scans it as
// publish_finalization does, and removes it. An entry path with an empty, `.` or `..`
// segment or a leading `/` is refused before anything is created, and no entry is ever
// created through a symbolic link, so nothing lands outside that directory.
//
// The scan refuses, with unsafe_entry naming the relative path: a name that is not UTF-8,
// not NFC or otherwise breaks 12.1; a symbolic link; a FIFO, socket or device; an empty
// directory at any depth; and a root entry of a runtime-owned name (`manifest.json`,
// `outcome.json`), whatever its type. The root itself may be empty.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { Refused } from './canonical.mjs';
import { nameProblem, describePath } from './content.mjs';

const RUNTIME_OWNED = ['manifest.json', 'outcome.json'];

function join(dir, nameBytes) {
  return Buffer.concat([dir, Buffer.from('/'), nameBytes]);
}

function scanDirectory(absolute, relative, isRoot) {
  const names = fs.readdirSync(absolute, { encoding: 'buffer' });
  if (names.length === 0 && !isRoot) {
    throw new Refused('unsafe_entry', `${describePath(relative)}: empty directory`);
  }
  names.sort(Buffer.compare);
  for (const name of names) {
    const rel = isRoot ? name : join(relative, name);
    const problem = nameProblem(rel);
    if (problem !== null) throw new Refused('unsafe_entry', `${describePath(rel)}: ${problem}`);
    if (isRoot && RUNTIME_OWNED.includes(name.toString('latin1'))) {
      throw new Refused('unsafe_entry', `${describePath(rel)}: runtime-owned name at the root`);
    }
    const abs = join(absolute, name);
    const st = fs.lstatSync(abs);
    if (st.isSymbolicLink()) throw new Refused('unsafe_entry', `${describePath(rel)}: symbolic link`);
    if (st.isDirectory()) scanDirectory(abs, rel, false);
    else if (!st.isFile()) throw new Refused('unsafe_entry', `${describePath(rel)}: special file`);
  }
}

export function scanPayload(rootBytes) {
  scanDirectory(rootBytes, Buffer.alloc(0), true);
}

// The reason an entry path could name something outside the private directory (an empty,
// `.` or `..` segment, a leading `/`, or a NUL byte the filesystem cannot hold), or null.
function escapeProblem(pathBytes) {
  const segments = pathBytes.toString('latin1').split('/');
  if (segments.some((seg) => seg === '' || seg === '.' || seg === '..')) return 'not a normalized relative path';
  if (segments.some((seg) => seg.includes('\0'))) return 'name holds a control character';
  return null;
}

// Create the missing parent directories of `relative` below `root`. A parent that exists
// must be a real directory: a symbolic link there is refused (the payload holds a link,
// and following it would create outside the private directory).
function makeParents(root, relative) {
  let end = relative.indexOf(0x2f);
  while (end > 0) {
    const parentRel = relative.subarray(0, end);
    const parent = join(root, parentRel);
    let st = null;
    try {
      st = fs.lstatSync(parent);
    } catch (err) {
      if (err.code !== 'ENOENT') throw err;
    }
    if (st === null) fs.mkdirSync(parent);
    else if (st.isSymbolicLink()) throw new Refused('unsafe_entry', `${describePath(parentRel)}: symbolic link`);
    else if (!st.isDirectory()) throw new Refused('invalid_record', `${describePath(parentRel)} is not a directory`);
    end = relative.indexOf(0x2f, end + 1);
  }
}

// entries: [{path: Buffer, type, data?: Buffer, executable?: bool, target?: Buffer}],
// created in order (a file's missing parents with it, 18.3), then scanned.
export function checkPayload(entries) {
  // Refused before anything is created (18.2), so no entry lands outside the directory.
  for (const e of entries) {
    const problem = escapeProblem(e.path);
    if (problem !== null) throw new Refused('unsafe_entry', `${describePath(e.path)}: ${problem}`);
    if (!['directory', 'file', 'symlink', 'fifo'].includes(e.type)) {
      throw new Refused('invalid_record', `unknown entry type ${JSON.stringify(e.type)}`);
    }
  }
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'runstore-js-payload-'));
  const root = Buffer.from(path.join(base, 'object'));
  try {
    fs.mkdirSync(root, { mode: 0o700 });
    let fifoCount = 0;
    for (const e of entries) {
      const abs = join(root, e.path);
      try {
        makeParents(root, e.path);
        if (e.type === 'directory') fs.mkdirSync(abs);
        else if (e.type === 'file') {
          fs.writeFileSync(abs, e.data, { flag: 'wx' }); // O_EXCL: never through a link
          fs.chmodSync(abs, e.executable ? 0o755 : 0o644);
        } else if (e.type === 'symlink') fs.symlinkSync(e.target, abs);
        else {
          // mkfifo takes its path as a (UTF-8) string argument: make the FIFO under an ASCII
          // name, then rename it to the raw name bytes (which must not exist yet).
          let exists = true;
          try {
            fs.lstatSync(abs);
          } catch {
            exists = false;
          }
          if (exists) throw new Refused('invalid_record', `${describePath(e.path)} is listed twice`);
          const temporary = path.join(base, `fifo-${fifoCount++}`);
          execFileSync('mkfifo', ['--', temporary], { stdio: 'ignore' });
          fs.renameSync(temporary, abs);
        }
      } catch (err) {
        if (err instanceof Refused) throw err;
        // An entry the filesystem will not create (a name over 255 bytes, ...) is refused
        // for its name when the name rules refuse it.
        const problem = nameProblem(e.path);
        if (problem !== null) throw new Refused('unsafe_entry', `${describePath(e.path)}: ${problem}`);
        throw new Refused('invalid_record', `cannot create ${describePath(e.path)}: ${err.message}`);
      }
    }
    scanPayload(root);
  } finally {
    fs.rmSync(base, { recursive: true, force: true });
  }
}
