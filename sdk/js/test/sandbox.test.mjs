// cove's TypeScript SDK against a real coved: every method, errors,
// streaming, bounded-memory transfers, locks, ephemeral sandboxes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, mkdtempSync, openSync, writeSync, closeSync, readFileSync, writeFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import http from 'node:http';
import { startCoved } from './coved.mjs';
import {
  createSandbox, connectSandbox, listSandboxes, restoreSandbox, withSandbox, resetDefaultTransport, Transport,
  NotFound, BadRequest, Conflict, CoveError, Unavailable,
} from '../dist/index.js';

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

const sandbox = async (fn, opts = {}) => withSandbox(opts, fn);

test('create, connect, list, destroy', async () => {
  const sb = await createSandbox({ name: 'js', memory: '256M', cpus: 0.5, pids: 100, env: { K: 'v', DROP: undefined }, cwd: '/tmp', timeout: 600 });
  assert.equal(sb.info.memory, 256 << 20);
  assert.equal(sb.info.pids, 100);
  assert.deepEqual(sb.info.env, { K: 'v' });
  assert.notEqual(sb.info.expires_at, null);
  const again = await connectSandbox(sb.id);
  assert.equal((await again.exec('echo $K; pwd')).stdout, 'v\n/tmp\n');
  assert.equal((await sb.refresh()).name, 'js');
  assert.ok((await listSandboxes()).some((s) => s.id === sb.id));
  await sb.destroy();
  await assert.rejects(connectSandbox(sb.id), (e) => e instanceof NotFound && e.code === 'not_found' && e.status === 404);
  assert.ok(!(await listSandboxes()).some((s) => s.id === sb.id));
});

test('an unknown sandbox is a typed error, a bad request too', async () => {
  await assert.rejects(connectSandbox('sb_aaaaaaaaaaaa'), NotFound);
  const gone = await createSandbox();
  await gone.destroy();
  await assert.rejects(gone.readFile('/etc/hostname'), NotFound);
  await assert.rejects(gone.exec('true'), NotFound);
  await assert.rejects(gone.destroy(), NotFound);
  const n = (await listSandboxes()).length;
  await assert.rejects(createSandbox({ image: 'no-such-image' }), (e) => e instanceof BadRequest && e instanceof CoveError && e.code === 'invalid_argument');
  assert.equal((await listSandboxes()).length, n);
});

test('exec', () => sandbox(async (sb) => {
  const r = await sb.exec('echo out; echo err >&2; exit 3');
  assert.deepEqual([r.exitCode, r.stdout, r.stderr, r.signal, r.timedOut], [3, 'out\n', 'err\n', null, false]);
  assert.equal((await sb.exec(['printf', '%s|', 'a b', 'c'])).stdout, 'a b|c|');
  assert.equal((await sb.exec('echo $A$B', { env: { A: '1', B: '2' } })).stdout, '12\n');
  await sb.writeFile('sub/f', 'x');
  assert.equal((await sb.exec('pwd', { cwd: 'sub' })).stdout, (await sb.workdir()) + '/sub\n');
  assert.equal((await sb.exec('pwd', { cwd: '/tmp' })).stdout, '/tmp\n');
  assert.equal((await sb.exec('id -u', { user: 'nobody' })).stdout, '65534\n');
  assert.equal((await sb.exec('cat', { stdin: 'fed' })).stdout, 'fed');
  assert.deepEqual((await sb.exec('od -An -tx1', { stdin: new Uint8Array([0, 255]) })).stdout.split(/\s+/).filter(Boolean), ['00', 'ff']);
  const t = await sb.exec('sleep 10', { timeoutMs: 300 });
  assert.ok(t.timedOut && t.exitCode === null && t.signal === 'KILL');
}));

test('streaming callbacks get output while the command runs', () => sandbox(async (sb) => {
  // The command waits for /tmp/go after printing 'first': it can end only
  // because the callback saw 'first' while it ran and the test wrote the file.
  const chunks = [];
  const errs = [];
  let wrote;
  const r = await sb.exec('echo first; echo warn >&2; while [ ! -e /tmp/go ]; do sleep 0.02; done; echo second', {
    timeoutMs: 30000,
    onStdout: (c) => { chunks.push(c); if (c.includes('first')) wrote = sb.writeFile('/tmp/go', ''); },
    onStderr: (c) => errs.push(c),
  });
  await wrote;
  assert.equal(r.exitCode, 0);
  assert.equal(r.timedOut, false);
  assert.equal(r.stdout, 'first\nsecond\n');
  assert.equal(chunks.join(''), r.stdout);
  assert.equal(errs.join(''), 'warn\n');
}));

test('files: write, read, list, remove; relative paths are under the workspace', () => sandbox(async (sb) => {
  await sb.writeFile('dir/a.txt', 'hello\n');
  await sb.writeFile('/tmp/b.bin', new Uint8Array([0, 255]), { mode: 0o600 });
  const ws = await sb.workdir();
  assert.equal(Buffer.from(await sb.readFile('dir/a.txt')).toString(), 'hello\n');
  assert.equal(await sb.readTextFile(`${ws}/dir/a.txt`), 'hello\n');
  assert.equal((await sb.exec('cat dir/a.txt')).stdout, 'hello\n');
  const bin = await sb.readFile('/tmp/b.bin');
  assert.ok(bin instanceof Uint8Array);
  assert.deepEqual([...bin], [0, 255]);
  assert.equal((await sb.exec('stat -c %a /tmp/b.bin')).stdout, '600\n');
  assert.deepEqual((await sb.list('dir')).map((e) => e.path), [`${ws}/dir/a.txt`]);
  assert.deepEqual((await sb.list()).map((e) => e.name), ['dir']);
  assert.deepEqual((await sb.list('.', { depth: 2 })).map((e) => e.name).sort(), ['a.txt', 'dir']);
  await assert.rejects(sb.readFile('dir'), TypeError);
  assert.equal(await sb.readFile('no/such/file'), null);
  assert.equal(await sb.readTextFile('/no-such-file'), null);
  await sb.remove('no-such-thing');
  await sb.remove('dir');
  assert.equal(await sb.readFile('dir/a.txt'), null);
  await assert.rejects(sb.downloadFile('/no-such-file', '/dev/null'), NotFound);
}));

test('the workspace is the sandbox cwd', () => sandbox(async (sb) => {
  await sb.writeFile('rel.txt', 'in srv');
  assert.equal((await sb.exec('cat /srv/rel.txt')).stdout, 'in srv');
  assert.equal((await sb.list())[0].path, '/srv/rel.txt');
}, { cwd: '/srv' }));

function resetPeak() { writeFileSync('/proc/self/clear_refs', '5'); }
function peakKiB() { return Number(/VmHWM:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))[1]); }

async function sha256File(path) {
  const h = createHash('sha256');
  for await (const c of createReadStream(path)) h.update(c);
  return h.digest('hex');
}

test('a 200 MB upload and download stream with bounded memory', () => sandbox(async (sb) => {
  const dir = mkdtempSync('/var/tmp/cove-js-big-');
  try {
    const src = join(dir, 'in');
    const back = join(dir, 'out');
    const block = randomBytes(1 << 20);
    const fd = openSync(src, 'w');
    for (let i = 0; i < 200; i++) writeSync(fd, Buffer.concat([block.subarray(i), block.subarray(0, i)]));
    closeSync(fd);
    const want = await sha256File(src);
    globalThis.gc?.();
    resetPeak();
    let base = peakKiB();
    await sb.uploadFile(src, 'big.bin');
    const up = peakKiB() - base;
    assert.equal((await sb.exec('sha256sum big.bin')).stdout.split(' ')[0], want);
    resetPeak();
    base = peakKiB();
    await sb.downloadFile('big.bin', back);
    const down = peakKiB() - base;
    assert.equal(statSync(back).size, 200 << 20);
    assert.equal(await sha256File(back), want);
    console.log(`# peak RSS growth KiB: upload ${up}, download ${down}`);
    assert.ok(up < 64 * 1024 && down < 64 * 1024, `peak RSS grew by ${up} / ${down} KiB`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}));

test('portable snapshot and restoreSandbox', () => sandbox(async (sb) => {
  await sb.writeFile('a.txt', 'text');
  await sb.writeFile('b.bin', new Uint8Array([255, 0]));
  const snap = await sb.snapshot();
  assert.equal(snap.version, 1);
  const value = JSON.parse(JSON.stringify(snap)); // as stored in a database
  const revived = await restoreSandbox(value);
  try {
    assert.equal(await revived.readTextFile('/root/a.txt'), 'text');
    assert.deepEqual([...(await revived.readFile('/root/b.bin'))], [255, 0]);
  } finally {
    await revived.destroy();
  }
  const n = (await listSandboxes()).length;
  await assert.rejects(restoreSandbox({ version: 1, files: [{ path: '../x', type: 'file', mode: '0644' }] }), BadRequest);
  assert.equal((await listSandboxes()).length, n);
}));

test('fork, checkpoint, rollback, branch', () => sandbox(async (sb) => {
  await sb.writeFile('f', '1');
  const copies = await sb.fork(2);
  try {
    assert.equal(new Set([sb.id, ...copies.map((c) => c.id)]).size, 3);
    await copies[0].writeFile('f', 'changed');
    assert.equal(await copies[1].readTextFile('f'), '1');
    assert.equal(await sb.readTextFile('f'), '1');
  } finally {
    for (const c of copies) await c.destroy();
  }
  const c1 = await sb.checkpoint('first');
  assert.deepEqual([c1.seq, c1.parent, c1.label], [1, null, 'first']);
  assert.match(c1.snapshot, /^sn_/);
  await sb.writeFile('f', '2');
  assert.equal((await sb.checkpoint()).seq, 2);
  const old = await sb.rollback(1);
  const branches = await sb.branch(2, 2);
  try {
    assert.equal(await old.readTextFile('f'), '1');
    assert.deepEqual(await Promise.all(branches.map((b) => b.readTextFile('f'))), ['2', '2']);
    assert.equal(await sb.readTextFile('f'), '2');
  } finally {
    for (const s of [old, ...branches]) await s.destroy();
  }
}));

test('lock excludes a second caller until the first releases', () => sandbox(async (sb) => {
  const other = await connectSandbox(sb.id, { transport: new Transport({ socketPath: coved.socket }) });
  const events = [];
  let release;
  const gate = new Promise((r) => { release = r; });
  let held;
  const isHeld = new Promise((r) => { held = r; });
  const first = sb.lock('package.json', async () => { events.push('first in'); held(); await gate; events.push('first out'); });
  await isHeld;
  const second = other.lock('package.json', () => { events.push('second in'); return 42; });
  await new Promise((r) => setTimeout(r, 500));
  assert.deepEqual(events, ['first in']);
  release();
  await first;
  assert.equal(await second, 42);
  assert.deepEqual(events, ['first in', 'first out', 'second in']);
  // Released when fn throws; renewed while fn runs; timeoutMs gives up with Conflict.
  await assert.rejects(sb.lock('k', () => { throw new Error('inside'); }), /inside/);
  await sb.lock('k', async () => {
    await new Promise((r) => setTimeout(r, 1500)); // over two leases
    await assert.rejects(other.lock('k', () => {}, { timeoutMs: 300 }), Conflict);
  }, { lease: 0.6 });
  assert.equal(await other.lock('k', () => 'free', { timeoutMs: 1000 }), 'free');
  assert.deepEqual((await coved.api('GET', `/v1/sandboxes/${sb.id}/locks`)).json.locks, []);
}));

test('capabilities', () => sandbox(async (sb) => {
  const raw = (await coved.api('GET', '/v1/capabilities')).json.backends.isolated.capabilities;
  assert.deepEqual(sb.capabilities, { ports: raw.ports, nativeSnapshot: raw.nativeSnapshot, resume: raw.resume });
}));

test('withSandbox destroys the sandbox even when fn throws', async () => {
  let id;
  assert.equal(await withSandbox({}, async (sb) => { id = sb.id; return (await sb.exec('echo ok')).stdout; }), 'ok\n');
  await assert.rejects(connectSandbox(id), NotFound);
  await assert.rejects(withSandbox({}, (sb) => { id = sb.id; throw new RangeError('boom'); }), RangeError);
  await assert.rejects(connectSandbox(id), NotFound);
  await withSandbox({}, (sb) => sb.destroy()); // destroyed inside: no error at the end
});

test('transport: environment, unreachable socket', async () => {
  assert.equal(new Transport().socketPath, coved.socket);
  const saved = process.env.COVE_SOCKET;
  delete process.env.COVE_SOCKET;
  try {
    assert.equal(new Transport().socketPath, '/run/cove/cove.sock');
  } finally {
    process.env.COVE_SOCKET = saved;
  }
  await assert.rejects(listSandboxes({ transport: new Transport({ socketPath: '/nonexistent/cove.sock' }) }), Unavailable);
  assert.throws(() => new Transport({ host: '127.0.0.1:1' }), TypeError); // a host without a token
});

test('a callback that throws ends the exec at once', () => sandbox(async (sb) => {
  const t0 = Date.now();
  await assert.rejects(sb.exec('echo x; sleep 30', { onStdout: () => { throw new RangeError('cb'); } }), RangeError);
  assert.ok(Date.now() - t0 < 15000);
  assert.equal((await sb.exec('echo next')).stdout, 'next\n');
}));

test('an external sandbox: file paths are inside its workspace', () => sandbox(async (sb) => {
  await sb.writeFile('sub/rel.txt', 'x');
  assert.equal((await sb.exec('cat sub/rel.txt')).stdout, 'x');
  assert.equal((await sb.exec('pwd', { cwd: 'sub' })).stdout, `${sb.info.workspace}/sub\n`);
  assert.equal(await sb.readTextFile('/sub/rel.txt'), 'x');
  assert.deepEqual((await sb.list()).map((e) => e.name), ['sub']);
}, { isolation: 'external' }));

// A GET through coved's port proxy, to 127.0.0.1 with the URL's host name.
const proxyGet = (url, headers = {}) => new Promise((resolve, reject) => {
  const u = new URL(url);
  const req = http.request({ host: '127.0.0.1', port: u.port, path: u.pathname + u.search, headers: { ...headers, host: u.host } },
    (res) => { res.resume(); res.on('end', () => resolve(res.statusCode)); });
  req.on('error', reject);
  req.end();
});

test('ports: expose, list, close', () => sandbox(async (sb) => {
  await sb.exec('setsid python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 < /dev/null &');
  const p = await sb.exposePort(8000);
  assert.equal(p.port, 8000);
  assert.equal(p.public, false);
  assert.match(p.token, /^[0-9a-f]{32}$/);
  assert.ok(p.url.startsWith(`http://8000-${sb.id.replace('_', '-')}.localhost:`));
  assert.equal(p.browserUrl, `${p.url}?cove_token=${p.token}`);
  let status = 0;
  for (let i = 0; i < 300 && status !== 200; i++) {
    status = await proxyGet(p.url, { 'x-cove-token': p.token });
    if (status !== 200) await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(status, 200);
  assert.equal(await proxyGet(p.url), 401);
  assert.equal(await proxyGet(p.browserUrl), 200);
  const again = await sb.exposePort(8000, { public: true });
  assert.equal(again.token, p.token);
  assert.equal(await proxyGet(p.url), 200);
  assert.deepEqual((await sb.ports()).map((x) => [x.port, x.public]), [[8000, true]]);
  await sb.closePort(8000);
  assert.deepEqual(await sb.ports(), []);
  assert.equal(await proxyGet(p.url), 404);
  await assert.rejects(sb.closePort(8000), NotFound);
  await assert.rejects(sb.exposePort(70000), BadRequest);
}));
