// sdkbench.mjs: `true` in one running sandbox through the TypeScript SDK
// (sandbox.exec(['true'])) and through node's raw http.request with a
// kept-alive agent sending the same JSON, alternating in blocks of 50 so
// both see the same machine. Run by bench/sdkbench.py:
//
//   node bench/sdkbench.mjs SOCKET N    -> one JSON line {sdk_p50, raw_p50, ...}
import { request, Agent } from 'node:http';
import { performance } from 'node:perf_hooks';
import { createSandbox, Transport } from '../sdk/js/dist/index.js';

const [socketPath, nArg] = process.argv.slice(2);
const n = Number(nArg ?? 1000);
const transport = new Transport({ socketPath });
const sb = await createSandbox({ transport });
const agent = new Agent({ keepAlive: true, maxSockets: 1 });
const body = Buffer.from(JSON.stringify({ cmd: ['true'] }));

function raw() {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, agent, method: 'POST', path: `/v1/sandboxes/${sb.id}/exec`,
      headers: { 'Content-Type': 'application/json', 'Content-Length': body.length } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const j = JSON.parse(Buffer.concat(chunks).toString());
        if (res.statusCode !== 200 || j.exit_code !== 0) reject(new Error(`raw exec: ${res.statusCode}`));
        else resolve();
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function viaSdk() {
  const r = await sb.exec(['true']);
  if (r.exitCode !== 0) throw new Error('sdk exec failed');
}

const p = (a, q) => { const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.floor(q * s.length))]; };
const times = { sdk: [], raw: [] };
for (let i = 0; i < 20; i++) { await viaSdk(); await raw(); } // warm-up
for (let done = 0; done < n; done += 50) {
  for (const [name, fn] of [['sdk', viaSdk], ['raw', raw]]) {
    for (let i = 0; i < Math.min(50, n - done); i++) {
      const t0 = performance.now();
      await fn();
      times[name].push(performance.now() - t0);
    }
  }
}
await sb.destroy();
transport.close();
agent.destroy();
console.log(JSON.stringify({ n, sdk_p50: p(times.sdk, 0.5), sdk_p95: p(times.sdk, 0.95), raw_p50: p(times.raw, 0.5), raw_p95: p(times.raw, 0.95) }));
