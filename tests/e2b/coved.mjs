// A private coved for the E2B tests: its own data root under /var/tmp, a
// unix socket, and --listen on a free loopback port. Exports what the SDK
// needs (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY) once it answers.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');
const BUILD = process.env.COVE_BUILD || path.join(ROOT, 'build');

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
    s.on('error', reject);
  });
}

export async function startCoved(again) {
  const dir = again ? again.dir : fs.mkdtempSync(path.join('/var/tmp', 'cove-e2b-'));
  const data = path.join(dir, 'data');
  const port = again ? again.port : await freePort();
  const log = fs.openSync(path.join(dir, 'coved.log'), 'a');
  const proc = spawn(path.join(BUILD, 'coved'), ['--data', data, '--socket', path.join(dir, 'cove.sock'),
    '--listen', `127.0.0.1:${port}`, '--proxy-listen', '127.0.0.1:0'], { stdio: ['ignore', log, log] });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60000;
  let token = null;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error('coved exited: ' + fs.readFileSync(path.join(dir, 'coved.log'), 'utf8'));
    try {
      token = token || fs.readFileSync(path.join(data, 'token'), 'utf8').trim();
      const r = await fetch(url + '/v1/health', { headers: { Authorization: `Bearer ${token}` } });
      if (r.status === 200) break;
    } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 50));
  }
  process.env.E2B_API_URL = url;
  process.env.E2B_SANDBOX_URL = url;
  process.env.E2B_API_KEY = token;
  return {
    url, token, dir, proc, port,
    // SIGTERM (its sandboxes live on), then a new coved on the same root.
    async restart() {
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      await exited;
      return startCoved({ dir, port });
    },
    log: () => fs.readFileSync(path.join(dir, 'coved.log'), 'utf8'),
    async stop() {
      // Every sandbox goes first (cove's own API), then coved, then its pool.
      try {
        const r = await fetch(url + '/v1/sandboxes', { headers: { Authorization: `Bearer ${token}` } });
        for (const sb of (await r.json()).sandboxes)
          await fetch(url + '/v1/sandboxes/' + sb.id, { method: 'DELETE', headers: { Authorization: `Bearer ${token}` } });
      } catch { /* coved gone already */ }
      await new Promise((r) => setTimeout(r, 300));
      if (proc.exitCode === null) {
        const exited = new Promise((r) => proc.once('exit', r));
        proc.kill('SIGTERM');
        await exited;
      }
      try { execFileSync('umount', ['-l', path.join(data, 'pool')], { stdio: 'ignore' }); } catch { /* not mounted */ }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
