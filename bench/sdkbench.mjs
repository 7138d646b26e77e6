// sdkbench.mjs: `true` in one running sandbox through the TypeScript SDK
// (sandbox.exec(['true'])) and through node's raw http.request with a
// kept-alive agent sending the same JSON, alternating call by call. Run by
// bench/sdkbench.py:
//
//   node bench/sdkbench.mjs SOCKET N
//     -> one JSON line {node_sdk: [[wall_ms, cpu_ms], ...], node_raw: [...]}
import { request, Agent } from 'node:http';
import { performance } from 'node:perf_hooks';
import { createSandbox, Transport } from '../sdk/js/dist/index.js';

const [socketPath, nArg] = process.argv.slice(2);
const n = Number(nArg ?? 2000);
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

async function timed(fn) {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await fn();
  const wall = performance.now() - t0;
  const c = process.cpuUsage(c0);
  return [wall, (c.user + c.system) / 1000];
}

const rows = { node_sdk: [], node_raw: [] };
for (let i = 0; i < n + 20; i++) {
  const pair = i % 2 ? [['node_raw', raw], ['node_sdk', viaSdk]] : [['node_sdk', viaSdk], ['node_raw', raw]];
  for (const [name, fn] of pair) {
    const r = await timed(fn);
    if (i >= 20) rows[name].push(r); // after the warm-up
  }
}
await sb.destroy();
transport.close();
agent.destroy();
console.log(JSON.stringify(rows));
