// E2B's SDK against coved, side by side with cove's own API, in one node
// process and one run: Sandbox.create + commands.run('true') + kill through
// the SDK (template 'base', whose create also makes E2B's user), and the
// same three steps as plain requests to cove's REST API on the same
// listener (POST /v1/sandboxes, POST .../exec, DELETE). Prints p50/p90/mean
// of each, in ms.
//
//   node bench/e2bbench.mjs [N]     (default 30; needs root, make, and
//                                    npm ci in tests/e2b)
import { createRequire } from 'node:module';
import { startCoved } from '../tests/e2b/coved.mjs';

const require = createRequire(new URL('../tests/e2b/package.json', import.meta.url));
const { Sandbox } = require('e2b');
const N = Number(process.argv[2] || 30);

function stats(ms) {
  const s = [...ms].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return { p50: q(0.5).toFixed(1), p90: q(0.9).toFixed(1), mean: (s.reduce((a, b) => a + b, 0) / s.length).toFixed(1) };
}

const coved = await startCoved();
try {
  const auth = { Authorization: `Bearer ${coved.token}`, 'Content-Type': 'application/json' };
  const native = async () => {
    const sb = await (await fetch(coved.url + '/v1/sandboxes', { method: 'POST', headers: auth, body: '{}' })).json();
    const r = await (await fetch(`${coved.url}/v1/sandboxes/${sb.id}/exec`, { method: 'POST', headers: auth,
      body: JSON.stringify({ cmd: ['/bin/bash', '-l', '-c', 'true'] }) })).json();
    if (r.exit_code !== 0) throw new Error('native exec failed');
    await fetch(`${coved.url}/v1/sandboxes/${sb.id}`, { method: 'DELETE', headers: auth });
  };
  const sdk = async () => {
    const sbx = await Sandbox.create();
    await sbx.commands.run('true');
    await sbx.kill();
  };
  const times = { sdk: [], native: [] };
  for (let i = 0; i < 3; i++) { await sdk(); await native(); } // warm-up
  for (let i = 0; i < N; i++) { // interleaved, so both see the same load
    for (const [name, fn] of [['sdk', sdk], ['native', native]]) {
      const t0 = performance.now();
      await fn();
      times[name].push(performance.now() - t0);
    }
  }
  const s = stats(times.sdk), n = stats(times.native);
  console.log(`e2bbench: ${N} runs each, create + run true + kill, ms`);
  console.log(`  E2B SDK (template base)   p50 ${s.p50}  p90 ${s.p90}  mean ${s.mean}`);
  console.log(`  cove REST (same listener) p50 ${n.p50}  p90 ${n.p90}  mean ${n.mean}`);
  console.log(`  ratio p50 ${(s.p50 / n.p50).toFixed(2)}`);
} finally {
  await coved.stop();
}
