// E2B's SDK against coved, side by side with cove's own API, in one node
// process and one run: Sandbox.create + commands.run('true') + kill through
// the SDK (template 'base', whose create also makes E2B's user; and
// template 'host', the same image without that step), and the same three
// steps as plain requests to cove's REST API on the same listener (POST
// /v1/sandboxes, POST .../exec of the same `/bin/bash -l -c true` the SDK
// runs, DELETE). Rounds are interleaved, so all see the same load. Prints
// p50/p90/mean of each and of each step, in ms; with --out, also
// "key value" lines for bench/summary.py.
//
//   node bench/e2bbench.mjs [N] [--url URL --token-file FILE] [--out FILE]
//     N: rounds (default 30). Without --url it starts a coved of its own
//     (tests/e2b/coved.mjs). Needs root, make, and npm ci in tests/e2b.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { startCoved } from '../tests/e2b/coved.mjs';

const require = createRequire(new URL('../tests/e2b/package.json', import.meta.url));
const { Sandbox } = require('e2b');

const args = process.argv.slice(2);
const opt = (name) => { const i = args.indexOf(name); return i >= 0 ? args.splice(i, 2)[1] : undefined; };
const url = opt('--url'), tokenFile = opt('--token-file'), out = opt('--out');
const N = Number(args[0] || 30);

function stats(ms) {
  const s = [...ms].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return { p50: q(0.5), p90: q(0.9), mean: s.reduce((a, b) => a + b, 0) / s.length };
}

let coved = null;
if (url) {
  process.env.E2B_API_URL = url;
  process.env.E2B_SANDBOX_URL = url;
  process.env.E2B_API_KEY = fs.readFileSync(tokenFile, 'utf8').trim();
} else {
  coved = await startCoved();
}
const base = process.env.E2B_API_URL, token = process.env.E2B_API_KEY;
try {
  const auth = { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' };
  const ok = async (r, what) => {
    if (!r.ok) throw new Error(`${what}: ${r.status} ${await r.text()}`);
    return r.status === 204 ? null : r.json();
  };
  // E2B's creates have the internet (cove's network "egress"), as cove's
  // own do by default.
  const NATIVE_SPEC = '{}';
  // Each flow returns its three steps' times.
  const native = async () => {
    const t = [performance.now()];
    const sb = await ok(await fetch(base + '/v1/sandboxes', { method: 'POST', headers: auth, body: NATIVE_SPEC }),
      'create');
    t.push(performance.now());
    const r = await ok(await fetch(`${base}/v1/sandboxes/${sb.id}/exec`, { method: 'POST', headers: auth,
      body: JSON.stringify({ cmd: ['/bin/bash', '-l', '-c', 'true'] }) }), 'exec');
    if (r.exit_code !== 0) throw new Error('native exec failed');
    t.push(performance.now());
    await ok(await fetch(`${base}/v1/sandboxes/${sb.id}`, { method: 'DELETE', headers: auth }), 'delete');
    t.push(performance.now());
    return t;
  };
  const sdk = (template) => async () => {
    const t = [performance.now()];
    const sbx = await Sandbox.create(template);
    t.push(performance.now());
    await sbx.commands.run('true');
    t.push(performance.now());
    if (!(await sbx.kill())) throw new Error('kill failed');
    t.push(performance.now());
    return t;
  };
  const flows = [['sdk', sdk('base')], ['sdk_host', sdk('host')], ['native', native]];
  const times = Object.fromEntries(flows.map(([name]) => [name, { all: [], create: [], run: [], kill: [] }]));
  for (let i = 0; i < 3; i++) for (const [, fn] of flows) await fn(); // warm-up
  for (let i = 0; i < N; i++) {
    for (const [name, fn] of i % 2 ? [...flows].reverse() : flows) {
      const t = await fn();
      const m = times[name];
      m.all.push(t[3] - t[0]);
      m.create.push(t[1] - t[0]);
      m.run.push(t[2] - t[1]);
      m.kill.push(t[3] - t[2]);
    }
  }
  const lines = [`e2b.runs ${N}`];
  const label = { sdk: "E2B SDK, template 'base'", sdk_host: "E2B SDK, template 'host'", native: 'cove REST, same listener' };
  console.log(`e2bbench: ${N} rounds, create + run true + kill, ms (p50 of each step: create / run / kill)`);
  for (const [name] of flows) {
    const m = times[name], s = stats(m.all);
    const steps = ['create', 'run', 'kill'].map((k) => stats(m[k]).p50);
    for (const [k, v] of Object.entries(s)) lines.push(`e2b.${name}.${k} ${v.toFixed(2)}`);
    ['create', 'run', 'kill'].forEach((k, i) => lines.push(`e2b.${name}.${k}.p50 ${steps[i].toFixed(2)}`));
    console.log(`  ${label[name].padEnd(26)} p50 ${s.p50.toFixed(1)}  p90 ${s.p90.toFixed(1)}  mean ${s.mean.toFixed(1)}` +
      `   (${steps.map((x) => x.toFixed(1)).join(' / ')})`);
  }
  const ratio = stats(times.sdk.all).p50 / stats(times.native.all).p50;
  lines.push(`e2b.ratio ${ratio.toFixed(3)}`);
  console.log(`  ratio p50 SDK/native ${ratio.toFixed(2)} (target <= 1.5)`);
  if (out) fs.writeFileSync(out, lines.join('\n') + '\n');
} finally {
  if (coved) await coved.stop();
}
