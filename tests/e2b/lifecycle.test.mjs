// E2B's pause, connect (resume) and autoPause through its own SDK, onto
// cove's lifecycle (engine/lifecycle.h): a paused sandbox keeps its files
// and its running processes, connect wakes it, the timeout pauses it when
// asked to. Raw requests where the SDK hides the status (200 / 201 / 409).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Sandbox, SandboxNotFoundError } from 'e2b';
import { startCoved } from './coved.mjs';

let coved;

before(async () => { coved = await startCoved(); });
after(async () => { await coved.stop(); });

const api = async (method, path, body) => {
  const r = await fetch(coved.url + path, { method, headers: { 'X-API-KEY': coved.token,
    'Content-Type': 'application/json' }, body: body && JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
};

async function poll(what, fn, ms = 30000) {
  const t0 = Date.now();
  for (;;) {
    const v = await fn();
    if (v) return v;
    assert.ok(Date.now() - t0 < ms, 'timed out waiting for ' + what);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test('pause, then connect: files and a running background process are intact', async () => {
  const s = await Sandbox.create({ timeoutMs: 120000 });
  try {
    await s.files.write('/home/user/kept.txt', 'kept');
    const h = await s.commands.run('i=0; while true; do i=$((i+1)); echo $i > /tmp/count; sleep 0.1; done',
      { background: true, timeoutMs: 0 });
    await poll('the counter', async () => Number(await s.files.read('/tmp/count').catch(() => '0')) > 2);
    assert.equal(await s.pause(), true);
    assert.equal((await Sandbox.getInfo(s.sandboxId)).state, 'paused');
    assert.equal(await s.isRunning(), false, '/health does not wake it');
    assert.equal((await Sandbox.getInfo(s.sandboxId)).state, 'paused');
    assert.equal(await s.pause(), false, 'a paused sandbox: 409, false');
    const paused = await Sandbox.list({ query: { state: ['paused'] } }).nextItems();
    assert.deepEqual(paused.map((x) => x.sandboxId), [s.sandboxId]);
    const running = await Sandbox.list({ query: { state: ['running'] } }).nextItems();
    assert.ok(!running.some((x) => x.sandboxId === s.sandboxId));

    const again = await Sandbox.connect(s.sandboxId);
    assert.equal((await again.getInfo()).state, 'running');
    assert.equal(await again.isRunning(), true);
    assert.equal(await again.files.read('/home/user/kept.txt'), 'kept');
    const c1 = Number(await again.files.read('/tmp/count'));
    await poll('the counter going on', async () => Number(await again.files.read('/tmp/count')) > c1);
    assert.ok((await again.commands.list()).some((p) => p.pid === h.pid), 'the process lives on');
    assert.equal(await again.commands.kill(h.pid), true);
  } finally {
    await s.kill();
  }
  await assert.rejects(Sandbox.pause('sb_nosuchthing0'), (e) => e instanceof SandboxNotFoundError);
});

test('the statuses: pause 204 then 409, connect 201 (woke it) then 200, resume of a running one 409', async () => {
  const s = await Sandbox.create({ timeoutMs: 120000 });
  try {
    const id = s.sandboxId;
    assert.equal((await api('POST', `/sandboxes/${id}/pause`, {})).status, 204);
    const again = await api('POST', `/sandboxes/${id}/pause`, {});
    assert.deepEqual([again.status, again.body.code], [409, 409]);
    let r = await api('POST', `/v2/sandboxes/${id}/connect`, { timeout: 60 });
    assert.equal(r.status, 201);
    assert.equal(r.body.sandboxID, id);
    assert.equal(r.body.envdAccessToken, s.envdAccessToken);
    r = await api('POST', `/v2/sandboxes/${id}/connect`, {});
    assert.equal(r.status, 200);
    r = await api('POST', `/sandboxes/${id}/resume`, {});
    assert.deepEqual([r.status, r.body.code], [409, 409]);
    r = await api('POST', `/sandboxes/${id}/pause`, { memory: 'no' });
    assert.deepEqual([r.status, r.body.code], [400, 400]);
    assert.equal((await Sandbox.getInfo(id)).state, 'running', 'a refused pause changes nothing');
  } finally {
    await s.kill();
  }
});

test('pause without memory (archive) keeps the files; connect starts it afresh on them', async () => {
  const s = await Sandbox.create({ timeoutMs: 120000 });
  try {
    await s.files.write('/home/user/disk.txt', 'on disk');
    assert.equal(await s.pause({ keepMemory: false }), true);
    assert.equal((await s.getInfo()).state, 'paused');
    const again = await s.connect();
    assert.equal(await again.files.read('/home/user/disk.txt'), 'on disk');
    assert.equal((await again.commands.run('whoami')).stdout, 'user\n');
  } finally {
    await s.kill();
  }
});

test("autoPause: the timeout pauses instead of killing, and connect wakes it", async () => {
  const s = await Sandbox.create({ timeoutMs: 1000, lifecycle: { onTimeout: 'pause' } });
  try {
    assert.equal((await s.getInfo()).lifecycle.onTimeout, 'pause');
    await s.files.write('/home/user/a.txt', 'still here');
    await poll('the pause at the timeout', async () => (await Sandbox.getInfo(s.sandboxId)).state === 'paused');
    const again = await Sandbox.connect(s.sandboxId, { timeoutMs: 60000 });
    assert.equal((await again.getInfo()).state, 'running');
    assert.equal(await again.files.read('/home/user/a.txt'), 'still here');
    const end = (await again.getInfo()).endAt.getTime();
    assert.ok(end > Date.now() + 30000, 'a new end after the wake');
  } finally {
    await s.kill();
  }
  const plain = await Sandbox.create({ timeoutMs: 1000 });
  assert.equal((await plain.getInfo()).lifecycle.onTimeout, 'kill');
  await poll('the kill at the timeout', async () => !(await Sandbox.list().nextItems())
    .some((x) => x.sandboxId === plain.sandboxId));
});
