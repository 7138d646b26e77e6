// A real coved for the SDK's tests, started as tests/integration/covetest.py
// starts one: its own data root (under /var/tmp) and socket; torn down with
// every sandbox it has.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, openSync, closeSync, rmSync, readFileSync } from 'node:fs';
import { request } from 'node:http';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const BUILD = process.env.COVE_BUILD ?? join(ROOT, 'build');

export function api(socketPath, method, path, body) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const req = request({ socketPath, method, path, headers: data ? { 'Content-Length': data.length } : {} }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        let json = null;
        try { json = JSON.parse(text); } catch { /* not JSON */ }
        resolve({ status: res.statusCode, json });
      });
    });
    req.on('error', reject);
    req.end(data);
  });
}

export async function startCoved(args = []) {
  const dir = mkdtempSync('/var/tmp/cove-js-');
  const d = { dir, data: join(dir, 'data'), socket: join(dir, 'cove.sock'), log: join(dir, 'coved.log') };
  const log = openSync(d.log, 'a');
  d.proc = spawn(join(BUILD, 'coved'), ['--data', d.data, '--socket', d.socket, ...args], { stdio: ['ignore', log, log] });
  closeSync(log);
  let exited = false;
  d.proc.on('exit', () => { exited = true; });
  const deadline = Date.now() + 60000;
  while (Date.now() < deadline) {
    if (exited) throw new Error('coved exited: ' + readFileSync(d.log, 'utf8').slice(-2000));
    try {
      if ((await api(d.socket, 'GET', '/v1/health')).status === 200) break;
    } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 50));
  }
  d.api = (method, path, body) => api(d.socket, method, path, body);
  d.stop = async () => {
    try {
      const { json } = await d.api('GET', '/v1/sandboxes');
      for (const s of json.sandboxes) await d.api('DELETE', `/v1/sandboxes/${s.id}`);
    } catch { /* coved gone */ }
    if (!exited) {
      const done = new Promise((r) => d.proc.on('exit', r));
      d.proc.kill('SIGTERM');
      await done;
    }
    spawnSync('umount', ['-l', join(d.data, 'pool')], { stdio: 'ignore' });
    rmSync(dir, { recursive: true, force: true });
  };
  return d;
}
