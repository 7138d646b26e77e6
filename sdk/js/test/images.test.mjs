// Images through the TypeScript SDK: import, list, get, a sandbox from
// one, pull from docker-registry on loopback with progress, delete
// (refused while in use), prune. The images are made by
// tests/integration/imagekit.py (Python, by hand).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { startCoved, ROOT } from './coved.mjs';
import {
  importImage, listImages, getImage, pullImage, deleteImage, pruneImages, withSandbox, resetDefaultTransport,
  Conflict, NotFound,
} from '../dist/index.js';

const KIT = join(ROOT, 'tests', 'integration');
const MAKE = `
import sys, imagekit
l2 = imagekit.layer([("work", "dir"), ("work/hello", "file", sys.argv[1].encode())])
img = imagekit.Image([imagekit.base_layer(), l2], {"Env": ["GREETING=js"], "WorkingDir": "/work", "Cmd": ["sleep", "600"]}, "gzip")
`;

let coved;
before(async () => {
  coved = await startCoved();
  process.env.COVE_SOCKET = coved.socket;
  delete process.env.COVE_HOST;
  delete process.env.COVE_TOKEN;
  resetDefaultTransport();
});
after(async () => {
  resetDefaultTransport();
  await coved.stop();
});

test('import, get, a sandbox from it, delete', async () => {
  const dir = mkdtempSync('/var/tmp/cove-js-img-');
  try {
    const tar = join(dir, 'image.tar');
    const r = spawnSync('python3', ['-c', MAKE + `
import os
open(sys.argv[2], "wb").write(imagekit.docker_archive(img, ["js-app:1"]))
print(img.id)`, 'from js\n', tar], { cwd: KIT, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const im = await importImage(tar);
    assert.deepEqual(im.names, ['docker.io/library/js-app:1']);
    assert.equal(im.config.working_dir, '/work');
    assert.ok((await listImages()).some((i) => i.id === im.id));
    assert.equal((await getImage('js-app:1')).id, im.id);
    await withSandbox({ image: 'js-app:1' }, async (sb) => {
      assert.deepEqual(sb.info.start, ['sleep', '600']);
      assert.equal((await sb.exec('echo $GREETING; cat hello')).stdout, 'js\nfrom js\n');
      await assert.rejects(deleteImage(im.id), (e) => e instanceof Conflict);
    });
    await deleteImage('js-app:1');
    await assert.rejects(getImage(im.id), (e) => e instanceof NotFound);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('pull with progress, prune', async () => {
  // a registry on loopback, filled by imagekit; it stops when stdin closes
  const reg = spawn('python3', ['-c', MAKE + `
reg = imagekit.Registry()
reg.push("js/app", "1", img)
print(reg.host, img.id, flush=True)
sys.stdin.read()
reg.stop()`, 'pulled\n'], { cwd: KIT, stdio: ['pipe', 'pipe', 'inherit'] });
  try {
    const [host, id] = (await createInterface({ input: reg.stdout })[Symbol.asyncIterator]().next()).value.split(' ');
    const seen = new Set();
    const im = await pullImage(`${host}/js/app:1`, { onProgress: (p) => seen.add(p.status) });
    assert.equal(im.id, id);
    assert.ok(seen.has('waiting') && seen.has('verified') && seen.has('unpacked'), [...seen].join());
    await withSandbox({ image: `${host}/js/app:1` }, async (sb) => {
      assert.equal((await sb.exec('cat hello')).stdout, 'pulled\n');
    });
    assert.ok((await pruneImages({ all: true })).includes(id));
  } finally {
    reg.stdin.end();
    await new Promise((resolve) => reg.on('exit', resolve));
  }
});
