// The TypeScript SDK over TCP with the API token, as COVE_HOST/COVE_TOKEN
// or a token file, against a coved listening on loopback.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startCoved } from './coved.mjs';
import { createSandbox, listSandboxes, connectSandbox, Transport, Unauthorized } from '../dist/index.js';

const freePort = () => new Promise((resolve) => {
  const s = createServer().listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
});

let coved;
let addr;
before(async () => {
  const port = await freePort();
  addr = `127.0.0.1:${port}`;
  coved = await startCoved(['--listen', addr]);
});
after(() => coved.stop());

test('TCP with the token', async () => {
  const tokenFile = join(coved.data, 'token');
  const t = new Transport({ host: addr, tokenFile });
  const sb = await createSandbox({ transport: t });
  try {
    assert.equal((await sb.exec('echo tcp')).stdout, 'tcp\n');
    assert.equal(await sb.readFile('nope'), null);
    assert.equal((await connectSandbox(sb.id, { transport: t })).id, sb.id);
  } finally {
    await sb.destroy();
  }
  process.env.COVE_HOST = addr;
  process.env.COVE_TOKEN = readFileSync(tokenFile, 'utf8').trim();
  try {
    const envT = new Transport();
    assert.equal(envT.host, addr);
    assert.deepEqual(await listSandboxes({ transport: envT }), []);
    envT.close();
  } finally {
    delete process.env.COVE_HOST;
    delete process.env.COVE_TOKEN;
  }
  await assert.rejects(listSandboxes({ transport: new Transport({ host: addr, token: '0'.repeat(64) }) }),
    (e) => e instanceof Unauthorized && e.status === 401 && e.code === 'unauthorized');
  t.close();
});
