// E2B's own SDK (the `e2b` npm package, pinned in package-lock.json)
// against a coved started here, unchanged but for E2B_API_URL,
// E2B_SANDBOX_URL and E2B_API_KEY.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import {
  Sandbox, CommandExitError, FileNotFoundError, InvalidArgumentError, TimeoutError,
  AuthenticationError, SandboxNotFoundError, NotFoundError, NotEnoughSpaceError,
} from 'e2b';
import { startCoved } from './coved.mjs';

let coved, sbx;

before(async () => {
  coved = await startCoved();
  sbx = await Sandbox.create({ metadata: { suite: 'sdk', run: 'a b&c=d' }, envs: { FROM_CREATE: 'yes' },
    timeoutMs: 120000 });
});

after(async () => { await coved.stop(); });

test('create gives a running sandbox that connect finds again', async () => {
  assert.match(sbx.sandboxId, /^sb_/);
  assert.equal(await sbx.isRunning(), true);
  const again = await Sandbox.connect(sbx.sandboxId);
  const r = await again.commands.run('echo connected');
  assert.equal(r.stdout, 'connected\n');
  const info = await sbx.getInfo();
  assert.equal(info.sandboxId, sbx.sandboxId);
  assert.equal(info.templateId, 'base');
  assert.equal(info.state, 'running');
  assert.deepEqual(info.metadata, { suite: 'sdk', run: 'a b&c=d' });
});

test('commands.run streams stdout and stderr, in order, and gives the exit code', async () => {
  const out = [], err = [];
  const r = await sbx.commands.run('echo one; echo two >&2; printf "\\xc3"; printf "\\xa9\\n"',
    { onStdout: (d) => out.push(d), onStderr: (d) => err.push(d) });
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, 'one\né\n');
  assert.equal(r.stderr, 'two\n');
  assert.equal(out.join(''), 'one\né\n');
  assert.deepEqual(err, ['two\n']);
});

test('a failing command throws CommandExitError with its exit code and output', async () => {
  await assert.rejects(sbx.commands.run('echo bad >&2; exit 3'), (e) => {
    assert.ok(e instanceof CommandExitError);
    assert.equal(e.exitCode, 3);
    assert.equal(e.stderr, 'bad\n');
    assert.equal(e.error, 'exit status 3');
    return true;
  });
});

test("E2B's user, its home, envs from create and per command, cwd, user root", async () => {
  const r = await sbx.commands.run('whoami; echo $HOME; pwd; echo $FROM_CREATE $MINE');
  assert.equal(r.stdout, 'user\n/home/user\n/home/user\nyes\n');
  const r2 = await sbx.commands.run('pwd; echo $MINE', { cwd: '/tmp', envs: { MINE: 'a b' } });
  assert.equal(r2.stdout, '/tmp\na b\n');
  const r3 = await sbx.commands.run('whoami; id -u', { user: 'root' });
  assert.equal(r3.stdout, 'root\n0\n');
  await assert.rejects(sbx.commands.run('true', { cwd: '/no/such/dir' }));
  const layout = await sbx.commands.run("grep -c '^user:' /etc/passwd /etc/group; stat -c '%a %U %G' /home/user; id -u");
  assert.equal(layout.stdout.replace(/\d{4,}\n$/, 'ID\n'), '/etc/passwd:1\n/etc/group:1\n750 user user\nID\n');
});

test('background commands: list, wait, kill', async () => {
  const h = await sbx.commands.run('sleep 30', { background: true });
  assert.ok(h.pid > 0);
  const listed = await sbx.commands.list();
  const mine = listed.find((p) => p.pid === h.pid);
  assert.ok(mine, 'the background command is listed');
  assert.equal(mine.cmd, '/bin/bash');
  assert.deepEqual(mine.args.slice(-1), ['sleep 30']);
  assert.equal(await h.kill(), true);
  await assert.rejects(h.wait(), (e) => e instanceof CommandExitError && /killed/.test(e.error));
  assert.equal(await sbx.commands.kill(h.pid), false);
  assert.ok(!(await sbx.commands.list()).some((p) => p.pid === h.pid));

  const h2 = await sbx.commands.run('sleep 0.3; echo done', { background: true });
  const r = await h2.wait();
  assert.equal(r.stdout, 'done\n');
});

test('stdin, and connect to a running command', async () => {
  const h = await sbx.commands.run('read line; echo got $line; sleep 0.5; echo later', { background: true, stdin: true });
  await sbx.commands.sendStdin(h.pid, 'hello\n');
  await new Promise((r) => setTimeout(r, 200));
  const seen = [];
  const again = await sbx.commands.connect(h.pid, { onStdout: (d) => seen.push(d) });
  const r = await again.wait();
  assert.equal(r.exitCode, 0);
  assert.ok(seen.join('').includes('later\n'), seen.join(''));
  await assert.rejects(sbx.commands.connect(999999), (e) => e instanceof NotFoundError);
});

test('timeoutMs ends a command with TimeoutError', async () => {
  const t0 = Date.now();
  await assert.rejects(sbx.commands.run('sleep 20', { timeoutMs: 1000 }), (e) => e instanceof TimeoutError);
  assert.ok(Date.now() - t0 < 10000);
});

test('files: write, read, list, exists, makeDir, rename, remove, getInfo', async () => {
  const info = await sbx.files.write('/tmp/f/hello.txt', 'hello world');
  assert.equal(info.path, '/tmp/f/hello.txt');
  assert.equal(await sbx.files.read('/tmp/f/hello.txt'), 'hello world');
  await sbx.files.write('/tmp/f/bytes.bin', new Uint8Array([0, 1, 2, 255]));
  assert.deepEqual([...(await sbx.files.read('/tmp/f/bytes.bin', { format: 'bytes' }))], [0, 1, 2, 255]);
  const many = await sbx.files.write([{ path: '/tmp/f/a.txt', data: 'A' }, { path: '/tmp/f/sub/b.txt', data: 'B' }]);
  assert.deepEqual(many.map((e) => e.path), ['/tmp/f/a.txt', '/tmp/f/sub/b.txt']);
  const stream = await sbx.files.read('/tmp/f/a.txt', { format: 'stream' });
  let text = '';
  for await (const chunk of stream) text += Buffer.from(chunk).toString();
  assert.equal(text, 'A');
  const rel = await sbx.files.write('rel.txt', 'in home');
  assert.equal(rel.path, '/home/user/rel.txt');
  assert.equal((await sbx.commands.run('cat ~/rel.txt; echo; stat -c %U ~/rel.txt')).stdout, 'in home\nuser\n');

  const top = (await sbx.files.list('/tmp/f')).map((e) => e.name).sort();
  assert.deepEqual(top, ['a.txt', 'bytes.bin', 'hello.txt', 'sub']);
  const deep = (await sbx.files.list('/tmp/f', { depth: 2 })).map((e) => e.path).sort();
  assert.ok(deep.includes('/tmp/f/sub/b.txt'));

  assert.equal(await sbx.files.exists('/tmp/f/hello.txt'), true);
  assert.equal(await sbx.files.exists('/tmp/f/nope'), false);
  assert.equal(await sbx.files.makeDir('/tmp/f/d1/d2'), true);
  assert.equal(await sbx.files.makeDir('/tmp/f/d1/d2'), false);
  const st = await sbx.files.getInfo('/tmp/f/hello.txt');
  assert.equal(st.type, 'file');
  assert.equal(st.size, 11);
  assert.equal((await sbx.files.getInfo('/tmp/f/d1')).type, 'dir');
  const moved = await sbx.files.rename('/tmp/f/hello.txt', '/tmp/f/moved.txt');
  assert.equal(moved.path, '/tmp/f/moved.txt');
  assert.equal(await sbx.files.exists('/tmp/f/hello.txt'), false);
  await sbx.files.remove('/tmp/f/sub');
  assert.equal(await sbx.files.exists('/tmp/f/sub'), false);
  await sbx.files.remove('/tmp/f/never-there');

  await assert.rejects(sbx.files.read('/tmp/f/missing'), (e) => e instanceof FileNotFoundError);
  await assert.rejects(sbx.files.read('/tmp/f'), (e) => e instanceof InvalidArgumentError);
  await assert.rejects(sbx.files.getInfo('/tmp/f/missing'), (e) => e instanceof FileNotFoundError);
  await assert.rejects(sbx.files.rename('/tmp/f/missing', '/tmp/f/x'), (e) => e instanceof FileNotFoundError);
});

test('files as another user: root writes where user cannot', async () => {
  await sbx.files.write('/root/secret.txt', 'r', { user: 'root' });
  assert.equal(await sbx.files.read('/root/secret.txt', { user: 'root' }), 'r');
  await assert.rejects(sbx.files.read('/root/secret.txt'));
});

test('Sandbox.list filters by metadata and pages', async () => {
  const other = await Sandbox.create({ metadata: { suite: 'sdk', run: 'other' } });
  try {
    const mine = await Sandbox.list({ query: { metadata: { run: 'a b&c=d' } } }).nextItems();
    assert.deepEqual(mine.map((s) => s.sandboxId), [sbx.sandboxId]);
    const pager = Sandbox.list({ query: { metadata: { suite: 'sdk' } }, limit: 1 });
    const first = await pager.nextItems();
    assert.equal(first.length, 1);
    assert.equal(pager.hasNext, true);
    const second = await pager.nextItems();
    assert.equal(second.length, 1);
    assert.equal(pager.hasNext, false);
    assert.deepEqual([first[0].sandboxId, second[0].sandboxId].sort(), [sbx.sandboxId, other.sandboxId].sort());
  } finally {
    await other.kill();
  }
});

test('setTimeout moves the end', async () => {
  await sbx.setTimeout(600000);
  const end = (await sbx.getInfo()).endAt.getTime();
  assert.ok(Math.abs(end - (Date.now() + 600000)) < 5000, String(end - Date.now()));
  await sbx.setTimeout(300000);
  assert.ok((await sbx.getInfo()).endAt.getTime() < end);
});

test('kill, and the errors for unknown sandboxes and bad keys', async () => {
  const s = await Sandbox.create();
  assert.equal(await s.kill(), true);
  assert.equal(await Sandbox.kill(s.sandboxId), false);
  assert.equal(await s.isRunning(), false);
  await assert.rejects(Sandbox.getInfo(s.sandboxId), (e) => e instanceof SandboxNotFoundError);
  await assert.rejects(Sandbox.connect('sb_nosuchthing0'), (e) => e instanceof SandboxNotFoundError);
  await assert.rejects(s.commands.run('true'));
  await assert.rejects(s.files.read('/etc/hostname'), (e) => e instanceof TimeoutError);
  await assert.rejects(Sandbox.create({ apiKey: 'wrong' }), (e) => e instanceof AuthenticationError);
  await assert.rejects(Sandbox.list({ apiKey: 'wrong' }).nextItems(), (e) => e instanceof AuthenticationError);
});

test('watchDir reports changes by name, and stop ends it', async () => {
  await sbx.files.makeDir('/tmp/w');
  const events = [];
  const h = await sbx.files.watchDir('/tmp/w', (e) => events.push(e));
  await sbx.files.write('/tmp/w/new.txt', 'x');
  await sbx.commands.run('rm /tmp/w/new.txt');
  const t0 = Date.now();
  while (!events.some((e) => e.type === 'remove') && Date.now() - t0 < 5000)
    await new Promise((r) => setTimeout(r, 50));
  await h.stop();
  assert.ok(events.some((e) => e.name === 'new.txt' && e.type === 'create'), JSON.stringify(events));
  assert.ok(events.some((e) => e.name === 'new.txt' && e.type === 'remove'), JSON.stringify(events));
  await assert.rejects(sbx.files.watchDir('/tmp/no-such-dir', () => {}), (e) => e instanceof FileNotFoundError);
});

test('pty: create, input, resize, kill', async () => {
  let out = '';
  const dec = new TextDecoder();
  const h = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += dec.decode(d); } });
  const waitFor = async (s) => {
    const t0 = Date.now();
    while (!out.includes(s) && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 50));
    assert.ok(out.includes(s), JSON.stringify(out.slice(-300)));
  };
  await sbx.pty.sendInput(h.pid, new TextEncoder().encode('stty size; echo $((6*7))x\n'));
  await waitFor('24 80');
  await waitFor('42x');
  await sbx.pty.resize(h.pid, { cols: 100, rows: 30 });
  await sbx.pty.sendInput(h.pid, new TextEncoder().encode('stty size\n'));
  await waitFor('30 100');
  assert.equal(await sbx.pty.kill(h.pid), true);
  await assert.rejects(h.wait());
});

test('closeStdin gives the process its end of input', async () => {
  const h = await sbx.commands.run('cat; echo end', { background: true, stdin: true });
  await sbx.commands.sendStdin(h.pid, 'abc');
  await sbx.commands.closeStdin(h.pid);
  const r = await h.wait();
  assert.equal(r.stdout, 'abcend\n');
});

test("StreamInput: the SDK's own transport cannot send a client stream (no streaming bodies in fetch)", async () => {
  const h = await sbx.commands.run('cat', { background: true, stdin: true });
  async function* input() {
    yield { event: { case: 'start', value: { process: { selector: { case: 'pid', value: h.pid } } } } };
  }
  await assert.rejects(sbx.commands.rpc.streamInput(input()), /does not support streaming request bodies/);
  await sbx.commands.sendStdin(h.pid, 'still there\n');
  await sbx.commands.closeStdin(h.pid);
  assert.equal((await h.wait()).stdout, 'still there\n');
});

test("network options: the internet by default; allowInternetAccess and network's lists as cove's policy", async () => {
  const native = async (id) => (await fetch(`${coved.url}/v1/sandboxes/${id}`,
    { headers: { Authorization: `Bearer ${coved.token}` } })).json();
  const plain = await native(sbx.sandboxId);
  assert.equal(plain.network.mode, 'egress');
  const closed = await Sandbox.create({ allowInternetAccess: false, network: { allowOut: ['10.77.0.0/16'] } });
  try {
    const n = await native(closed.sandboxId);
    assert.deepEqual([n.network.mode, n.network.allow_out, n.network.deny_out],
      ['egress', ['10.77.0.0/16'], ['0.0.0.0/0', '::/0']]);
    assert.equal((await closed.commands.run('echo up')).stdout, 'up\n');
    await closed.updateNetwork({ denyOut: ['10.78.0.0/16'] });
    const u = await native(closed.sandboxId);
    assert.deepEqual([u.network.allow_out, u.network.deny_out], [[], ['10.78.0.0/16']]);
    await assert.rejects(closed.updateNetwork({ denyOut: ['bad cidr'] }), (e) => /400/.test(e.message));
    assert.deepEqual((await native(closed.sandboxId)).network.deny_out, ['10.78.0.0/16'], 'a refused update changes nothing');
    await assert.rejects(Sandbox.updateNetwork('sb_nosuchthing0', {}), (e) => e instanceof SandboxNotFoundError);
  } finally {
    await closed.kill();
  }
  const before = (await Sandbox.list().nextItems()).length;
  await assert.rejects(Sandbox.create({ network: { denyOut: ['not a cidr!'] } }), (e) => /400/.test(e.message));
  await assert.rejects(Sandbox.create({ network: { allowPublicTraffic: false } }), (e) => /400/.test(e.message));
  await assert.rejects(Sandbox.create({ network: { maskRequestHost: 'x.${PORT}' } }), (e) => /400/.test(e.message));
  assert.equal((await Sandbox.list().nextItems()).length, before, 'the refused creates made nothing');
});

test("fork: copies of the files at one instant, each its own sandbox and token; the original's own go on", async () => {
  await sbx.files.write('/home/user/forked.txt', 'before');
  const copies = await sbx.fork({ count: 2, timeoutMs: 60000 });
  try {
    assert.equal(copies.length, 2);
    assert.ok(copies.every((c) => c instanceof Sandbox && c.sandboxId !== sbx.sandboxId));
    assert.notEqual(copies[0].sandboxId, copies[1].sandboxId);
    await copies[0].files.write('/home/user/forked.txt', 'copy 0');
    assert.equal(await copies[1].files.read('/home/user/forked.txt'), 'before');
    assert.equal(await sbx.files.read('/home/user/forked.txt'), 'before');
    assert.equal((await copies[1].commands.run('whoami')).stdout, 'user\n');
    const info = await copies[0].getInfo();
    assert.ok(Math.abs(info.endAt.getTime() - (Date.now() + 60000)) < 10000);
    assert.deepEqual(info.metadata, { suite: 'sdk', run: 'a b&c=d' });
  } finally {
    for (const c of copies) await c.kill();
  }
  await assert.rejects(Sandbox.fork('sb_nosuchthing0'), (e) => e instanceof SandboxNotFoundError);
  await assert.rejects(sbx.fork({ count: 0 }), (e) => /400/.test(e.message));
});

test("templates: a cove image by name ('host' runs as its default user, root); an unknown one is a 400", async () => {
  const s = await Sandbox.create('host');
  try {
    assert.equal((await s.getInfo()).templateId, 'host');
    assert.equal((await s.commands.run('whoami')).stdout, 'root\n');
  } finally {
    await s.kill();
  }
  const before = (await Sandbox.list().nextItems()).length;
  await assert.rejects(Sandbox.create('no-such/image:1'), (e) => /400/.test(e.message));
  assert.equal((await Sandbox.list().nextItems()).length, before);
});

test('snapshots: createSnapshot, listSnapshots, Sandbox.create(snapshotId) with the files, deleteSnapshot', async () => {
  await sbx.files.write('/home/user/snap.txt', 'in the snapshot');
  const snap = await sbx.createSnapshot({ name: 'e2b-snap' });
  assert.match(snap.snapshotId, /^sn_/);
  assert.deepEqual(snap.names, ['e2b-snap']);
  await sbx.files.write('/home/user/snap.txt', 'after it');
  const mine = await sbx.listSnapshots().nextItems();
  assert.deepEqual(mine.map((x) => x.snapshotId), [snap.snapshotId]);
  const byName = await Sandbox.listSnapshots({ name: 'e2b-snap' }).nextItems();
  assert.deepEqual(byName.map((x) => x.snapshotId), [snap.snapshotId]);
  const s = await Sandbox.create(snap.snapshotId, { envs: { FROM_SNAP: 'yes' }, metadata: { from: 'snap' },
    timeoutMs: 60000 });
  try {
    assert.equal(await s.files.read('/home/user/snap.txt'), 'in the snapshot');
    assert.equal((await s.commands.run('echo $FROM_SNAP $FROM_CREATE; whoami')).stdout, 'yes yes\nuser\n');
    const info = await s.getInfo();
    assert.deepEqual(info.metadata, { from: 'snap' });
    assert.ok(Math.abs(info.endAt.getTime() - (Date.now() + 60000)) < 10000);
  } finally {
    await s.kill();
  }
  assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true);
  assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false);
  assert.deepEqual(await sbx.listSnapshots().nextItems(), []);
});

test("templates: cove's own by name, their env under the create's, their start command waited for", async () => {
  const auth = { Authorization: `Bearer ${coved.token}`, 'Content-Type': 'application/json' };
  const mk = async (body) => {
    const r = await fetch(coved.url + '/v1/templates', { method: 'POST', headers: auth, body: JSON.stringify(body) });
    assert.equal(r.status, 201, await r.text());
  };
  await mk({ name: 'e2b-env', env: { TPL_VAR: 'from-template', BOTH: 'template' } });
  await mk({ name: 'e2b-web', start: ['python3', '-m', 'http.server', '8123', '--bind', '127.0.0.1'],
    cwd: '/tmp', ready: { port: 8123, timeout: 60 } });
  try {
    const a = await Sandbox.create('e2b-env', { envs: { BOTH: 'create' }, metadata: { t: '1' } });
    try {
      assert.equal((await a.commands.run('echo $TPL_VAR $BOTH')).stdout, 'from-template create\n');
      const info = await a.getInfo();
      assert.deepEqual([info.templateId, info.metadata], ['e2b-env', { t: '1' }]);
    } finally {
      await a.kill();
    }
    const b = await Sandbox.create('e2b-web');
    try {
      const r = await b.commands.run('python3 -c "import urllib.request as u; print(u.urlopen(\'http://127.0.0.1:8123/\').status)"');
      assert.equal(r.stdout, '200\n', 'the start command was up when create answered');
    } finally {
      await b.kill();
    }
  } finally {
    for (const n of ['e2b-env', 'e2b-web']) await fetch(`${coved.url}/v1/templates/${n}`, { method: 'DELETE', headers: auth });
  }
});

test('Sandbox.list: ordered by start (asc, desc), by template, startedAfter, and pages that follow the order', async () => {
  const t0 = new Date();
  const made = [];
  for (let i = 0; i < 3; i++) made.push((await Sandbox.create('host', { metadata: { order: 'x' } })).sandboxId);
  try {
    const q = { metadata: { order: 'x' } };
    const asc = await Sandbox.list({ query: q, order: 'asc' }).nextItems();
    assert.deepEqual(asc.map((s) => s.sandboxId), made);
    const desc = await Sandbox.list({ query: q, order: 'desc' }).nextItems();
    assert.deepEqual(desc.map((s) => s.sandboxId), [...made].reverse());
    const pager = Sandbox.list({ query: q, order: 'desc', limit: 2 });
    const pages = [await pager.nextItems()];
    assert.equal(pager.hasNext, true);
    pages.push(await pager.nextItems());
    assert.equal(pager.hasNext, false);
    assert.deepEqual(pages.flat().map((s) => s.sandboxId), [...made].reverse());
    const hosts = await Sandbox.list({ query: { template: 'host' } }).nextItems();
    assert.deepEqual(hosts.map((s) => s.sandboxId).filter((id) => made.includes(id)), made);
    assert.ok(!hosts.some((s) => s.sandboxId === sbx.sandboxId), 'base is not host');
    const later = await Sandbox.list({ query: { startedAfter: t0 } }).nextItems();
    assert.ok(!later.some((s) => s.sandboxId === sbx.sandboxId), 'startedAfter leaves older ones out');
    assert.ok(made.every((id) => later.some((s) => s.sandboxId === id)));
  } finally {
    for (const id of made) await Sandbox.kill(id);
  }
});

test('signed upload and download URLs (uploadUrl, downloadUrl): no header needed, a bad or expired signature is refused', async () => {
  const up = await sbx.uploadUrl('/home/user/signed.txt');
  const form = new FormData();
  form.append('file', new Blob(['signed bytes']), 'signed.txt');
  let r = await fetch(up, { method: 'POST', body: form });
  assert.equal(r.status, 200, await r.clone().text());
  assert.equal((await r.json())[0].path, '/home/user/signed.txt');
  const down = await sbx.downloadUrl('/home/user/signed.txt');
  r = await fetch(down);
  assert.deepEqual([r.status, await r.text()], [200, 'signed bytes']);
  r = await fetch(down.replace(/signature=v1_[^&]+/, 'signature=v1_AAAA'));
  assert.equal(r.status, 401, 'a wrong signature: no sandbox is named, none found');
  const asRoot = await sbx.downloadUrl('/home/user/signed.txt', { user: 'root', useSignatureExpiration: 60 });
  r = await fetch(asRoot);
  assert.deepEqual([r.status, await r.text()], [200, 'signed bytes']);
  const expired = new URL(asRoot);
  expired.searchParams.set('signature_expiration', String(Math.floor(Date.now() / 1000) - 10));
  r = await fetch(expired);
  assert.notEqual(r.status, 200, 'a changed expiration breaks the signature');
  r = await fetch(down.replace('read', 'x'), { method: 'POST', body: form });
  assert.notEqual(r.status, 200, 'a read signature does not write');
});
test("getHost(port): a host that cove's port proxy routes to the sandbox's port, public as E2B has it", async () => {
  await sbx.files.write('/tmp/site/hello.html', 'hello from the sandbox');
  const h = await sbx.commands.run('cd /tmp/site && exec python3 -m http.server 8000 --bind 127.0.0.1',
    { background: true, timeoutMs: 0 });
  try {
    const host = sbx.getHost(8000);
    assert.match(host, new RegExp(`^8000-${sbx.sandboxId}\\.localhost:\\d+$`));
    // *.localhost does not resolve on this machine: the connection goes to
    // the proxy's address, the name in Host, as a resolver would make it.
    const get = (path) => new Promise((resolve, reject) => {
      http.get({ host: '127.0.0.1', port: Number(host.split(':')[1]), path, headers: { Host: host } }, (res) => {
        let body = '';
        res.on('data', (d) => { body += d; });
        res.on('end', () => resolve({ status: res.statusCode, body }));
      }).on('error', reject);
    });
    const t0 = Date.now();
    let r;
    while ((r = await get('/hello.html')).status !== 200 && Date.now() - t0 < 20000)
      await new Promise((res) => setTimeout(res, 200));
    assert.deepEqual([r.status, r.body], [200, 'hello from the sandbox']);
    // envd's URL with another E2b-Sandbox-Port: on to the proxy (fetch follows the 307)
    const f = await fetch(coved.url + '/hello.html', { headers: { 'E2b-Sandbox-Id': sbx.sandboxId,
      'E2b-Sandbox-Port': '8000' } });
    assert.deepEqual([f.status, await f.text()], [200, 'hello from the sandbox']);
    const ports = await (await fetch(`${coved.url}/v1/sandboxes/${sbx.sandboxId}/ports`,
      { headers: { Authorization: `Bearer ${coved.token}` } })).json();
    assert.ok(JSON.stringify(ports).includes('8000'), JSON.stringify(ports));
  } finally {
    await h.kill();
  }
});

test("getMetrics: one reading now, from the sandbox's cgroup and disk", async () => {
  let [m] = await sbx.getMetrics();
  assert.ok(Math.abs(m.timestamp.getTime() - Date.now()) < 10000, String(m.timestamp));
  assert.equal(m.cpuCount, 2);
  assert.equal(m.memTotal, 512 * 1024 * 1024);
  assert.ok(m.memUsed > 0 && m.memUsed < m.memTotal, String(m.memUsed));
  assert.equal(typeof m.cpuUsedPct, 'number');
  await sbx.commands.run('timeout 1 sh -c "while :; do :; done" || true');
  [m] = await sbx.getMetrics();
  assert.ok(m.cpuUsedPct > 0, `CPU used since the reading before: ${m.cpuUsedPct}`);
  assert.deepEqual(await sbx.getMetrics({ start: new Date(Date.now() - 3600e3), end: new Date(Date.now() - 1800e3) }), []);
  await assert.rejects(Sandbox.getMetrics('sb_nosuchthing0'), (e) => e instanceof SandboxNotFoundError);
  const r = await fetch(`${coved.url}/sandboxes/${sbx.sandboxId}/metrics?start=9&end=3`, { headers: { 'X-API-KEY': coved.token } });
  assert.deepEqual([r.status, (await r.json()).code], [400, 400]);
});

test('a write past the disk limit: NotEnoughSpaceError (507)', async () => {
  const auth = { Authorization: `Bearer ${coved.token}`, 'Content-Type': 'application/json' };
  const made = await (await fetch(coved.url + '/v1/sandboxes', { method: 'POST', headers: auth,
    body: JSON.stringify({ disk: '16M', network: 'none' }) })).json();
  assert.ok(made.id, JSON.stringify(made));
  try {
    const s = await Sandbox.connect(made.id);
    await assert.rejects(s.files.write('/tmp/big.bin', new Uint8Array(32 << 20)), (e) => e instanceof NotEnoughSpaceError);
    await s.files.remove('/tmp/big.bin'); // what was written up to the limit
    assert.equal((await s.files.write('/tmp/small.txt', 'fits')).name, 'small.txt');
  } finally {
    await fetch(`${coved.url}/v1/sandboxes/${made.id}`, { method: 'DELETE', headers: auth });
  }
});
