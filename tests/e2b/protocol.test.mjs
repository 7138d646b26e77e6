// E2B's wire protocol as coved answers it, byte by byte where the SDK is
// strict (../../shared/e2b-protocol.md): error shapes, Connect envelopes,
// malformed input that must change nothing, chunked request bodies,
// keepalives. Raw HTTP, no SDK.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import zlib from 'node:zlib';
import { startCoved } from './coved.mjs';

let coved, sbx;

function request(method, path, { headers = {}, body, chunks } = {}) {
  const u = new URL(coved.url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, method, path, headers }, (res) => {
      const parts = [];
      res.on('data', (d) => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(parts) }));
    });
    req.on('error', reject);
    if (chunks) { // Transfer-Encoding: chunked, as the SDK sends its POSTs
      let i = 0;
      const next = () => (i < chunks.length ? req.write(chunks[i++], () => setTimeout(next, 20)) : req.end());
      next();
    } else {
      req.end(body);
    }
  });
}

const api = (method, path, body, key = coved.token) => request(method, path, {
  headers: { 'X-API-KEY': key, 'Content-Type': 'application/json' }, body: body && JSON.stringify(body) });

const envd = (path, body, extra = {}) => request('POST', path, {
  headers: { 'E2b-Sandbox-Id': sbx.sandboxID, 'E2b-Sandbox-Port': '49983', 'X-Access-Token': sbx.envdAccessToken,
    'Content-Type': 'application/json', 'Connect-Protocol-Version': '1', ...extra },
  body: typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body) });

function envelope(flags, payload) {
  const p = Buffer.from(payload);
  const h = Buffer.alloc(5);
  h[0] = flags;
  h.writeUInt32BE(p.length, 1);
  return Buffer.concat([h, p]);
}

function frames(buf) {
  const out = [];
  for (let o = 0; o + 5 <= buf.length;) {
    const n = buf.readUInt32BE(o + 1);
    out.push({ flags: buf[o], msg: JSON.parse(buf.subarray(o + 5, o + 5 + n).toString()) });
    o += 5 + n;
  }
  return out;
}

const stream = (method, body, extra = {}) => envd('/process.Process/' + method, body,
  { 'Content-Type': 'application/connect+json', ...extra });

before(async () => {
  coved = await startCoved();
  const r = await api('POST', '/v2/sandboxes', { templateID: 'base', timeout: 120 });
  assert.equal(r.status, 201);
  sbx = JSON.parse(r.body);
});

after(async () => { await coved.stop(); });

test('the Sandbox answer: IDs, a semver envdVersion, its own access token', () => {
  assert.match(sbx.envdVersion, /^\d+\.\d+\.\d+$/);
  assert.match(sbx.envdAccessToken, /^[0-9a-f]{32}$/);
  assert.notEqual(sbx.envdAccessToken, coved.token);
  assert.equal(sbx.templateID, 'base');
});

test('control-plane errors are {code, message} with the status as code', async () => {
  let r = await api('GET', '/sandboxes/sb_nosuchthing0');
  assert.equal(r.status, 404);
  assert.equal(JSON.parse(r.body).code, 404);
  assert.equal(r.headers['content-type'], 'application/json');
  r = await api('GET', '/v2/sandboxes', undefined, 'wrong-key');
  assert.equal(r.status, 401);
  assert.equal(JSON.parse(r.body).code, 401);
  r = await api('POST', '/v2/sandboxes', { templateID: 'base', timeout: 'soon' });
  assert.deepEqual([r.status, JSON.parse(r.body).code], [400, 400]);
  r = await api('POST', '/v2/sandboxes', { templateID: 'base', bogus: 1 });
  assert.equal(r.status, 400);
  r = await api('POST', '/sandboxes/sb_nosuchthing0/pause', {});
  assert.deepEqual([r.status, JSON.parse(r.body).code], [404, 404]);
  const list = JSON.parse((await api('GET', '/v2/sandboxes')).body);
  assert.equal(list.length, 1, 'the bad creates made nothing');
});

test("cove's own API still answers on the same listener", async () => {
  const r = await request('GET', '/v1/sandboxes', { headers: { Authorization: `Bearer ${coved.token}` } });
  assert.equal(r.status, 200);
  assert.equal(JSON.parse(r.body).sandboxes[0].id, sbx.sandboxID);
});

test('chunked request bodies: create and an octet-stream upload (gzip)', async () => {
  let r = await request('POST', '/v2/sandboxes', { headers: { 'X-API-KEY': coved.token,
    'Content-Type': 'application/json' }, chunks: ['{"templateID":', '"base","metadata":{"k":"chunked"}', '}'] });
  assert.equal(r.status, 201, r.body.toString());
  const other = JSON.parse(r.body);
  assert.equal((await api('DELETE', `/sandboxes/${other.sandboxID}`)).status, 204);
  const gz = zlib.gzipSync(Buffer.from('zipped bytes\n'.repeat(1000)));
  r = await request('POST', '/files?path=%2Ftmp%2Fz.txt', { headers: { 'E2b-Sandbox-Id': sbx.sandboxID,
    'X-Access-Token': sbx.envdAccessToken, 'Content-Type': 'application/octet-stream', 'Content-Encoding': 'gzip' },
  chunks: [gz.subarray(0, 10), gz.subarray(10)] });
  assert.equal(r.status, 200, r.body.toString());
  assert.equal(JSON.parse(r.body)[0].path, '/tmp/z.txt');
  r = await request('GET', '/files?path=%2Ftmp%2Fz.txt', { headers: { 'E2b-Sandbox-Id': sbx.sandboxID,
    'X-Access-Token': sbx.envdAccessToken } });
  assert.equal(r.body.toString(), 'zipped bytes\n'.repeat(1000));
});

test('envd auth: health is open, the rest needs the sandbox token', async () => {
  let r = await request('GET', '/health', { headers: { 'E2b-Sandbox-Id': sbx.sandboxID } });
  assert.equal(r.status, 204);
  r = await envd('/filesystem.Filesystem/Stat', { path: '/' }, { 'X-Access-Token': 'wrong' });
  assert.deepEqual([r.status, JSON.parse(r.body).code], [401, 'unauthenticated']);
  r = await request('GET', '/files?path=%2Fetc%2Fhostname', { headers: { 'E2b-Sandbox-Id': sbx.sandboxID,
    'X-Access-Token': coved.token } });
  assert.deepEqual([r.status, JSON.parse(r.body).code], [401, 401]);
  r = await request('GET', '/health', { headers: { 'E2b-Sandbox-Id': 'sb_nosuchthing0' } });
  assert.equal(r.status, 502);
  assert.deepEqual(JSON.parse(r.body), { code: 502, message: 'The sandbox was not found', sandboxId: 'sb_nosuchthing0' });
});

test("envd by host name, as E2B's proxy routes: <port>-<id>.<domain>", async () => {
  let r = await request('POST', '/filesystem.Filesystem/Stat', { headers: { Host: `49983-${sbx.sandboxID}.localhost`,
    'X-Access-Token': sbx.envdAccessToken, 'Content-Type': 'application/json' }, body: '{"path":"/tmp"}' });
  assert.equal(r.status, 200, r.body.toString());
  assert.equal(JSON.parse(r.body).entry.type, 'FILE_TYPE_DIRECTORY');
  r = await request('GET', '/x?y=1', { headers: { Host: `3000-${sbx.sandboxID}.localhost` } });
  assert.equal(r.status, 307, 'other ports: on to the port proxy');
  assert.match(r.headers.location, /^http:\/\/127\.0\.0\.1:\d+\/x\?y=1$/);
  r = await request('GET', '/x', { headers: { Host: '3000-sb_nosuchthing0.localhost' } });
  assert.equal(r.status, 502, 'an unknown sandbox: 502 whatever the port');
});

test('Connect unary errors: JSON bodies with snake_case codes', async () => {
  let r = await envd('/filesystem.Filesystem/Stat', { path: '/no/such' });
  assert.deepEqual([r.status, JSON.parse(r.body).code], [404, 'not_found']);
  r = await envd('/filesystem.Filesystem/Stat', { path: 5 });
  assert.deepEqual([r.status, JSON.parse(r.body).code], [400, 'invalid_argument']);
  r = await envd('/filesystem.Filesystem/Stat', 'not json');
  assert.deepEqual([r.status, JSON.parse(r.body).code], [400, 'invalid_argument']);
  r = await envd('/filesystem.Filesystem/Nope', {});
  assert.deepEqual([r.status, JSON.parse(r.body).code], [501, 'unimplemented']);
  r = await envd('/process.Process/SendSignal', { process: { pid: 999999 }, signal: 'SIGNAL_SIGKILL' });
  assert.deepEqual([r.status, JSON.parse(r.body).code], [404, 'not_found']);
  r = await envd('/filesystem.Filesystem/MakeDir', { path: '/tmp' });
  assert.deepEqual([r.status, JSON.parse(r.body).code], [409, 'already_exists']);
});

test('a stream: start, data, end, then the end-of-stream frame', async () => {
  const req = { process: { cmd: '/bin/bash', args: ['-l', '-c', 'echo hi; exit 2'] }, stdin: false };
  const r = await stream('Start', envelope(0, JSON.stringify(req)));
  assert.equal(r.status, 200);
  assert.equal(r.headers['content-type'], 'application/connect+json');
  const f = frames(r.body);
  assert.ok(f[0].msg.event.start.pid > 0);
  assert.equal(Buffer.from(f[1].msg.event.data.stdout, 'base64').toString(), 'hi\n');
  assert.deepEqual(f[2].msg.event.end, { exitCode: 2, exited: true, status: 'exit status 2', error: 'exit status 2' });
  assert.deepEqual(f[3], { flags: 2, msg: {} });
  assert.equal(f.length, 4);
});

test('malformed envelopes: an end-of-stream error, HTTP 200, and no process', async () => {
  const good = JSON.stringify({ process: { cmd: '/bin/touch', args: ['/tmp/started'] } });
  const bad = [
    Buffer.from(''), Buffer.from([0, 0, 0]), envelope(1, good), envelope(2, good),
    Buffer.concat([envelope(0, good), Buffer.from([0])]), envelope(0, good).subarray(0, 20),
    envelope(0, '[1]'), envelope(0, '{"process":{"cmd":7}}'), Buffer.from(good),
  ];
  for (const body of bad) {
    const r = await stream('Start', body);
    assert.equal(r.status, 200);
    const f = frames(r.body);
    assert.equal(f.length, 1);
    assert.equal(f[0].flags, 2);
    assert.equal(f[0].msg.error.code, 'invalid_argument', JSON.stringify(f[0].msg));
  }
  const r = await envd('/filesystem.Filesystem/Stat', { path: '/tmp/started' });
  assert.equal(r.status, 404, 'none of them ran');
});

test('metadata and the envd token outlive a restart of coved', async () => {
  let r = await api('POST', '/v2/sandboxes', { templateID: 'base', metadata: { keep: 'me' } });
  const kept = JSON.parse(r.body);
  coved = await coved.restart();
  r = await api('GET', `/sandboxes/${kept.sandboxID}`);
  assert.equal(r.status, 200, r.body.toString());
  assert.deepEqual(JSON.parse(r.body).metadata, { keep: 'me' });
  r = await api('GET', '/v2/sandboxes?metadata=' + encodeURIComponent('keep=me'));
  assert.deepEqual(JSON.parse(r.body).map((s) => s.sandboxID), [kept.sandboxID]);
  r = await request('POST', '/filesystem.Filesystem/Stat', { headers: { 'E2b-Sandbox-Id': kept.sandboxID,
    'X-Access-Token': kept.envdAccessToken, 'Content-Type': 'application/json' }, body: '{"path":"/home/user"}' });
  assert.equal(r.status, 200, r.body.toString());
  assert.equal((await api('DELETE', `/sandboxes/${kept.sandboxID}`)).status, 204);
  assert.equal((await api('DELETE', `/sandboxes/${kept.sandboxID}`)).status, 404);
});

test('keepalives while a stream is silent, and the deadline kills the process', async () => {
  const req = { process: { cmd: '/bin/sh', args: ['-c', 'sleep 2.5; echo late'] } };
  let r = await stream('Start', envelope(0, JSON.stringify(req)), { 'Keepalive-Ping-Interval': '1' });
  let f = frames(r.body);
  assert.ok(f[0].msg.event.start);
  assert.ok(f.filter((x) => x.msg.event && x.msg.event.keepalive).length >= 2, JSON.stringify(f));
  assert.equal(f.at(-1).flags, 2);
  r = await stream('Start', envelope(0, JSON.stringify({ process: { cmd: '/bin/sleep', args: ['30'] } })),
    { 'Connect-Timeout-Ms': '500' });
  f = frames(r.body);
  assert.equal(f.at(-1).msg.error.code, 'deadline_exceeded');
  assert.equal(f.at(-2).msg.event.end.status, 'signal: killed');
});

const fsCall = (method, body) => envd('/filesystem.Filesystem/' + method, body);
const upload = (path, data) => request('POST', '/files?path=' + encodeURIComponent(path), {
  headers: { 'E2b-Sandbox-Id': sbx.sandboxID, 'X-Access-Token': sbx.envdAccessToken,
    'Content-Type': 'application/octet-stream' }, body: data });

async function poll(what, fn, ms = 20000) {
  const t0 = Date.now();
  for (;;) {
    const v = await fn();
    if (v) return v;
    assert.ok(Date.now() - t0 < ms, 'timed out waiting for ' + what);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test('polled watchers: CreateWatcher, GetWatcherEvents (drained), RemoveWatcher', async () => {
  assert.equal((await fsCall('MakeDir', { path: '/tmp/pw' })).status, 200);
  let r = await fsCall('CreateWatcher', { path: '/tmp/pw' });
  assert.equal(r.status, 200, r.body.toString());
  const id = JSON.parse(r.body).watcherId;
  assert.match(id, /^[0-9a-f]{32}$/);
  assert.equal((await upload('/tmp/pw/a.txt', 'x')).status, 200);
  const seen = [];
  await poll('the create event', async () => {
    const g = await fsCall('GetWatcherEvents', { watcherId: id });
    assert.equal(g.status, 200, g.body.toString());
    seen.push(...(JSON.parse(g.body).events || []));
    return seen.some((e) => e.name === 'a.txt' && e.type === 'EVENT_TYPE_CREATE');
  });
  r = await fsCall('GetWatcherEvents', { watcherId: id });
  assert.ok(!(JSON.parse(r.body).events || []).some((e) => e.type === 'EVENT_TYPE_CREATE'), 'fetched events go');
  assert.equal((await fsCall('RemoveWatcher', { watcherId: id })).status, 200);
  r = await fsCall('GetWatcherEvents', { watcherId: id });
  assert.deepEqual([r.status, JSON.parse(r.body).code], [404, 'not_found']);
  r = await fsCall('RemoveWatcher', { watcherId: id });
  assert.deepEqual([r.status, JSON.parse(r.body).code], [404, 'not_found']);
  r = await fsCall('CreateWatcher', { path: '/tmp/no-such-dir' });
  assert.deepEqual([r.status, JSON.parse(r.body).code], [404, 'not_found']);
});

test('polled watchers are bounded per sandbox: 429 resource_exhausted past 64, room again once removed', async () => {
  const ids = [];
  let r;
  for (;;) {
    r = await fsCall('CreateWatcher', { path: '/tmp' });
    if (r.status !== 200) break;
    ids.push(JSON.parse(r.body).watcherId);
    assert.ok(ids.length <= 64, 'at most 64');
  }
  assert.deepEqual([r.status, JSON.parse(r.body).code], [429, 'resource_exhausted']);
  assert.ok(ids.length >= 1);
  for (const id of ids) assert.equal((await fsCall('RemoveWatcher', { watcherId: id })).status, 200);
  r = await fsCall('CreateWatcher', { path: '/tmp' });
  assert.equal(r.status, 200);
  assert.equal((await fsCall('RemoveWatcher', { watcherId: JSON.parse(r.body).watcherId })).status, 200);
});

test("a polled watcher of a folder that goes: its events, then the watch's end as an error", async () => {
  assert.equal((await fsCall('MakeDir', { path: '/tmp/pw2' })).status, 200);
  const id = JSON.parse((await fsCall('CreateWatcher', { path: '/tmp/pw2', recursive: true })).body).watcherId;
  assert.equal((await fsCall('Remove', { path: '/tmp/pw2' })).status, 200);
  const r = await poll('the end', async () => {
    const g = await fsCall('GetWatcherEvents', { watcherId: id });
    return g.status !== 200 && g;
  });
  assert.equal(r.headers['content-type'], 'application/json');
  assert.equal(typeof JSON.parse(r.body).code, 'string');
  assert.equal((await fsCall('GetWatcherEvents', { watcherId: id })).status, 404, 'an ended watcher goes once told');
});

test('StreamInput: a whole client stream in one body; each bad one changes nothing', async () => {
  const started = stream('Start', envelope(0, JSON.stringify({ process: { cmd: '/bin/cat' }, tag: 'si', stdin: true })));
  await poll('the process', async () => JSON.parse((await envd('/process.Process/List', {})).body).processes
    ?.some((p) => p.tag === 'si'));
  const msg = (m) => envelope(0, JSON.stringify(m));
  const data = (s) => msg({ data: { input: { stdin: Buffer.from(s).toString('base64') } } });
  const start = msg({ start: { process: { tag: 'si' } } });
  const bad = [
    [Buffer.alloc(0), 'invalid_argument'],
    [Buffer.concat([data('BAD1'), start]), 'invalid_argument'],
    [Buffer.concat([start, data('BAD2'), start]), 'invalid_argument'],
    [Buffer.concat([start, data('BAD3'), msg({ bogus: {} })]), 'invalid_argument'],
    [Buffer.concat([start, data('BAD4'), msg({ data: { input: { stdin: '!!' } } })]), 'invalid_argument'],
    [Buffer.concat([start, data('BAD5'), envelope(2, '{}')]), 'invalid_argument'],
    [Buffer.concat([start, data('BAD6'), envelope(1, '{}')]), 'invalid_argument'],
    [Buffer.concat([start, data('BAD7')]).subarray(0, -2), 'invalid_argument'],
    [Buffer.concat([msg({ start: { process: { pid: 999999 } } }), data('BAD8')]), 'not_found'],
    [Buffer.concat([msg({ start: { process: { pid: 'x' } } }), data('BAD9')]), 'invalid_argument'],
  ];
  for (const [body, code] of bad) {
    const r = await stream('StreamInput', body);
    assert.equal(r.status, 200);
    const f = frames(r.body);
    assert.deepEqual([f.length, f[0].flags, f[0].msg.error.code], [1, 2, code], JSON.stringify(f));
  }
  const r = await stream('StreamInput', Buffer.concat([start, data('hello '), msg({ keepalive: {} }), data('world\n')]));
  assert.deepEqual(frames(r.body), [{ flags: 0, msg: {} }, { flags: 2, msg: {} }]);
  const pid = JSON.parse((await envd('/process.Process/List', {})).body).processes.find((p) => p.tag === 'si').pid;
  assert.equal((await envd('/process.Process/CloseStdin', { process: { pid } })).status, 200);
  const out = frames((await started).body).filter((x) => x.msg.event?.data)
    .map((x) => Buffer.from(x.msg.event.data.stdout, 'base64').toString()).join('');
  assert.equal(out, 'hello world\n');
});

test('bad input through envd: the Connect error shape, and nothing changes', async () => {
  assert.equal((await upload('/tmp/keep/k.txt', 'kept')).status, 200);
  const unary = [
    ['filesystem.Filesystem/ListDir', { path: '/tmp/keep', depth: 'x' }, 'invalid_argument'],
    ['filesystem.Filesystem/ListDir', { path: '/tmp/keep', depth: -1 }, 'invalid_argument'],
    ['filesystem.Filesystem/MakeDir', { path: ['/tmp/keep/new'] }, 'invalid_argument'],
    ['filesystem.Filesystem/MakeDir', {}, 'invalid_argument'],
    ['filesystem.Filesystem/Move', { source: '/tmp/keep/k.txt' }, 'invalid_argument'],
    ['filesystem.Filesystem/Move', { source: '/tmp/keep/k.txt', destination: 9 }, 'invalid_argument'],
    ['filesystem.Filesystem/Remove', { path: null }, 'invalid_argument'],
    ['filesystem.Filesystem/Remove', '{"path":"/tmp/keep"', 'invalid_argument'],
    ['filesystem.Filesystem/Remove', '[]', 'invalid_argument'],
    ['filesystem.Filesystem/Remove', envelope(0, '{"path":"/tmp/keep"}'), 'invalid_argument'],
    ['filesystem.Filesystem/CreateWatcher', { path: '/tmp/keep', recursive: 'yes' }, 'invalid_argument'],
    ['filesystem.Filesystem/GetWatcherEvents', {}, 'invalid_argument'],
    ['filesystem.Filesystem/RemoveWatcher', { watcherId: 5 }, 'invalid_argument'],
    ['process.Process/SendSignal', { process: { pid: 'one' }, signal: 'SIGNAL_SIGKILL' }, 'invalid_argument'],
    ['process.Process/SendSignal', { process: {}, signal: 'SIGNAL_SIGKILL' }, 'invalid_argument'],
    ['process.Process/SendInput', { process: { pid: 1 }, input: { stdin: '%%%' } }, 'not_found'],
    ['process.Process/CloseStdin', { process: 'x' }, 'invalid_argument'],
    ['process.Process/Update', { process: { pid: 999999 }, pty: { size: { cols: 80, rows: 24 } } }, 'not_found'],
    ['process.Process/Nope', {}, 'unimplemented'],
    ['filesystem.Filesystem/Nope', {}, 'unimplemented'],
    ['other.Service/Call', {}, 'unimplemented'],
    ['process.Process2/List', {}, 'unimplemented'],
  ];
  for (const [path, body, code] of unary) {
    const r = await envd('/' + path, body);
    assert.equal(r.headers['content-type'], 'application/json', path);
    const j = JSON.parse(r.body);
    assert.deepEqual([j.code, r.status, typeof j.message], [code, { invalid_argument: 400, not_found: 404,
      unimplemented: 501 }[code], 'string'], `${path} ${JSON.stringify(body)}: ${r.body}`);
  }
  const streams = [
    ['process.Process/Start', { process: { cmd: '/bin/touch', args: '/tmp/keep/made' } }],
    ['process.Process/Start', { process: { cmd: '/bin/touch', args: ['/tmp/keep/made'], envs: ['A=1'] } }],
    ['process.Process/Start', { process: { cmd: '/bin/touch', args: ['/tmp/keep/made'], cwd: 7 } }],
    ['process.Process/Start', { process: { cmd: '/bin/touch', args: ['/tmp/keep/made'] }, stdin: 'yes' }],
    ['process.Process/Start', { process: { cmd: '/bin/touch', args: ['/tmp/keep/made'] }, pty: { size: 3 } }],
    ['process.Process/Start', { process: { cmd: '/bin/touch', args: ['/tmp/keep/made'] }, tag: 12 }],
    ['process.Process/Connect', { process: { pid: -4 } }],
    ['filesystem.Filesystem/WatchDir', { path: 1 }],
    ['filesystem.Filesystem/WatchDir', { path: '/tmp/keep', recursive: 'no' }],
  ];
  for (const [path, body] of streams) {
    const r = await envd('/' + path, envelope(0, JSON.stringify(body)), { 'Content-Type': 'application/connect+json' });
    assert.equal(r.status, 200, path);
    const f = frames(r.body);
    assert.deepEqual([f.length, f[0].flags, f[0].msg.error.code], [1, 2, 'invalid_argument'], JSON.stringify(f));
  }
  const list = JSON.parse((await fsCall('ListDir', { path: '/tmp/keep' })).body).entries.map((e) => e.name);
  assert.deepEqual(list, ['k.txt'], 'nothing was made, moved or removed');
  const again = await request('GET', '/files?path=%2Ftmp%2Fkeep%2Fk.txt', { headers: { 'E2b-Sandbox-Id': sbx.sandboxID,
    'X-Access-Token': sbx.envdAccessToken } });
  assert.equal(again.body.toString(), 'kept');
});

test('bad input through the control plane: {code, message}, and nothing changes', async () => {
  const id = sbx.sandboxID;
  const before = JSON.parse((await api('GET', `/sandboxes/${id}`)).body);
  const bad = [
    ['POST', '/v2/sandboxes', { templateID: 7 }, 400],
    ['POST', '/v2/sandboxes', { templateID: '../etc' }, 400],
    ['POST', '/v2/sandboxes', { templateID: 'base', envVars: { A: 1 } }, 400],
    ['POST', '/v2/sandboxes', { templateID: 'base', metadata: ['a'] }, 400],
    ['POST', '/v2/sandboxes', { templateID: 'base', timeout: -5 }, 400],
    ['POST', '/v2/sandboxes', '{"templateID":', 400],
    ['POST', '/v2/sandboxes', '[]', 400],
    ['POST', `/sandboxes/${id}/timeout`, { timeout: 'long' }, 400],
    ['POST', `/sandboxes/${id}/timeout`, {}, 400],
    ['POST', `/sandboxes/${id}/timeout`, { timeout: 60, extra: 1 }, 400],
    ['POST', `/sandboxes/${id}/connect`, { timeout: 'x' }, 400],
    ['POST', `/sandboxes/${id}/refreshes`, { duration: [] }, 400],
    ['GET', '/v2/sandboxes?limit=0', undefined, 400],
    ['GET', '/v2/sandboxes?limit=x', undefined, 400],
    ['GET', '/v2/sandboxes?state=sleeping', undefined, 400],
    ['GET', '/v2/sandboxes?nextToken=-1', undefined, 400],
    ['GET', '/v2/sandboxes?bogus=1', undefined, 400],
    ['GET', '/v2/sandboxes?order=up', undefined, 400],
    ['GET', '/v2/sandboxes?startedAfter=yesterday', undefined, 400],
    ['GET', '/v2/sandboxes?nextToken=12:sb_x:y', undefined, 400],
    ['GET', `/sandboxes/${id}/nope`, undefined, 404],
    ['PUT', `/sandboxes/${id}`, undefined, 405],
    ['DELETE', '/v2/sandboxes', undefined, 405],
    ['POST', `/sandboxes/${id}/snapshots`, { name: 7 }, 400],
    ['POST', `/sandboxes/${id}/snapshots`, { label: 'x' }, 400],
    ['GET', '/snapshots?limit=0', undefined, 400],
    ['GET', '/snapshots?sandbox=x', undefined, 400],
    ['POST', '/snapshots', undefined, 405],
    ['DELETE', '/templates/sn_nosuchthing0', undefined, 404],
    ['GET', '/templates/base', undefined, 405],
    ['POST', `/sandboxes/${id}/fork`, { count: 1.5 }, 400],
    ['POST', `/sandboxes/${id}/fork`, { count: 101 }, 400],
    ['PUT', `/sandboxes/${id}/network`, { allowOut: 'x' }, 400],
  ];
  for (const [method, path, body, status] of bad) {
    const r = await request(method, path, { headers: { 'X-API-KEY': coved.token, 'Content-Type': 'application/json' },
      body: typeof body === 'string' ? body : body && JSON.stringify(body) });
    assert.equal(r.headers['content-type'], 'application/json', path);
    const j = JSON.parse(r.body);
    assert.deepEqual([r.status, j.code, typeof j.message], [status, status, 'string'], `${method} ${path}: ${r.body}`);
  }
  const after = JSON.parse((await api('GET', `/sandboxes/${id}`)).body);
  assert.equal(after.endAt, before.endAt, 'the end did not move');
  assert.equal(JSON.parse((await api('GET', '/v2/sandboxes')).body).length, 1, 'no sandbox was made');
  assert.deepEqual(JSON.parse((await api('GET', '/snapshots')).body), [], 'no snapshot was made');
});

test('snapshots page with X-Next-Token', async () => {
  const made = [];
  for (const name of ['p1', 'p2', 'p3'])
    made.push(JSON.parse((await api('POST', `/sandboxes/${sbx.sandboxID}/snapshots`, { name })).body).snapshotID);
  let r = await api('GET', `/snapshots?sandboxID=${sbx.sandboxID}&limit=2`);
  assert.deepEqual(JSON.parse(r.body).map((x) => x.snapshotID), made.slice(0, 2));
  const next = r.headers['x-next-token'];
  assert.ok(next);
  r = await api('GET', `/snapshots?sandboxID=${sbx.sandboxID}&limit=2&nextToken=${next}`);
  assert.deepEqual(JSON.parse(r.body).map((x) => x.snapshotID), made.slice(2));
  assert.equal(r.headers['x-next-token'], undefined);
  for (const id of made) assert.equal((await api('DELETE', `/templates/${id}`)).status, 204);
});
