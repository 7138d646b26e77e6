// Every ```js example of docs/sdk-js.md, run as it is written (importing
// '@cove/sdk', which resolves to this package's build) against the test's
// coved.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startCoved, ROOT } from './coved.mjs';

const examples = [...readFileSync(join(ROOT, 'docs', 'sdk-js.md'), 'utf8').matchAll(/^```js\n(.*?)^```/gms)].map((m) => m[1]);
// Inside the package's folder, so that '@cove/sdk' resolves to it by name (its "exports").
const dir = join(ROOT, 'sdk', 'js', 'test', '.examples');

let coved;
before(async () => { coved = await startCoved(); mkdirSync(dir, { recursive: true }); });
after(async () => { rmSync(dir, { recursive: true, force: true }); await coved.stop(); });

test('the doc has examples', () => assert.ok(examples.length >= 5));

examples.forEach((code, n) => {
  test(`docs/sdk-js.md example ${n + 1}`, async () => {
    const file = join(dir, `example_${n + 1}.mjs`);
    writeFileSync(file, code);
    try {
      await promisify(execFile)(process.execPath, [file], { env: { ...process.env, COVE_SOCKET: coved.socket }, timeout: 120000 });
    } catch (e) {
      assert.fail(`example ${n + 1} failed:\n${code}\n${e.stdout}${e.stderr}`);
    }
    const { json } = await coved.api('GET', '/v1/sandboxes');
    assert.deepEqual(json.sandboxes.map((s) => s.id), [], 'the example left sandboxes');
  });
});
