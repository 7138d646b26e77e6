// Templates and warm pools through the TypeScript SDK, against a real coved.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startCoved } from './coved.mjs';
import {
  createTemplate, getTemplate, listTemplates, createSandbox, resetDefaultTransport, NotFound, BadRequest,
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

test('a template\'s fields, overrides, routes and errors', async () => {
  const t = await createTemplate('js-tpl', { memory: '256M', env: { A: 'a', B: 'b' }, user: 'nobody', idleTimeout: 60 });
  try {
    assert.equal(t.info.idle_timeout, 60);
    assert.ok((await listTemplates()).some((x) => x.name === 'js-tpl'));
    assert.equal((await getTemplate('js-tpl')).info.memory, '256M');
    const sb = await t.sandbox({ env: { B: 'over' } });
    assert.equal(sb.info.template, 'js-tpl');
    assert.equal(sb.info.memory, 256 << 20);
    assert.equal((await sb.exec('echo $A $B $(id -un)')).stdout, 'a over nobody\n');
    await sb.destroy();
    const sb2 = await createSandbox({ template: t, user: 'root', memory: '300M' });
    assert.equal(sb2.info.memory, 300 << 20);
    assert.equal((await sb2.exec('id -un')).stdout, 'root\n');
    await sb2.destroy();
    await assert.rejects(createTemplate('js-bad', { ready: { port: 0 } }), BadRequest);
    await assert.rejects(createSandbox({ template: 'js-none' }), NotFound);
  } finally {
    await t.delete();
  }
  await assert.rejects(getTemplate('js-tpl'), NotFound);
});

test('start, ready and a warm pool', async () => {
  const t = await createTemplate('js-warm', {
    warm: 1, start: 'python3 -m http.server 8141 --bind 127.0.0.1', ready: { port: 8141, timeout: 60 },
  });
  try {
    const deadline = Date.now() + 120000;
    while ((await t.refresh()).pool.ready < 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    assert.equal(t.pool.ready, 1);
    const sb = await t.sandbox({ env: { E: 'e' } });
    assert.equal(sb.info.from_pool, true);
    const r = await sb.exec("echo $E; python3 -c 'import urllib.request as u; print(u.urlopen(\"http://127.0.0.1:8141/\").status)'");
    assert.equal(r.stdout, 'e\n200\n');
    await sb.destroy();
  } finally {
    await t.delete();
  }
});
