// Sandbox handles over coved's REST API. Paths: an absolute path as it is;
// a relative one is relative to the sandbox's workspace (its cwd, else its
// user's home, where commands start).
import { createReadStream, createWriteStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import { Conflict, NotFound } from './errors.js';
import { readEvents, resultFromJson, type ExecResult, type OutputCallback } from './exec.js';
import { Transport, defaultTransport, readAll } from './transport.js';

export interface SandboxOptions {
  image?: string;
  name?: string;
  /** Bytes, or a size string like "512M". */
  memory?: number | string;
  cpus?: number;
  pids?: number;
  env?: Record<string, string | undefined>;
  /** The working folder of commands and of relative paths. */
  cwd?: string;
  user?: string;
  /** Seconds until coved deletes the sandbox. */
  timeout?: number;
  isolation?: 'isolated' | 'external';
  /** A template (or its name) whose fields the sandbox inherits, those
   * given here winning; from its warm pool when one fits (info.from_pool). */
  template?: string | { name: string };
  /** A start command, kept running (argv, or a shell string). */
  start?: string | string[];
  /** A readiness check that create waits for. */
  ready?: ReadyCheck;
  network?: 'egress' | 'none';
  allow_out?: string[];
  deny_out?: string[];
  transport?: Transport;
}

/** Exactly one of port, url (http://127.0.0.1:PORT/PATH inside the
 * sandbox) or cmd; timeout in seconds (default 30). */
export interface ReadyCheck {
  port?: number;
  url?: string;
  cmd?: string | string[];
  timeout?: number;
}

export interface ExecOptions {
  cwd?: string;
  env?: Record<string, string | undefined>;
  user?: string;
  timeoutMs?: number;
  stdin?: string | Uint8Array;
  onStdout?: OutputCallback;
  onStderr?: OutputCallback;
}

export interface Capabilities {
  ports: boolean;
  nativeSnapshot: boolean;
  resume: boolean;
}

export interface FileEntry {
  name: string; path: string; type: 'file' | 'dir' | 'symlink' | 'other';
  size: number; mode: string; mtime: number; uid: number; gid: number; target?: string;
}

/** The portable snapshot: JSON-serializable files of the workspace. */
export interface PortableSnapshot {
  version: 1;
  files: Array<Record<string, unknown>>;
}

export interface Checkpoint {
  seq: number; parent: number | null; label: string; snapshot: string; createdAt: number;
}

/** A sandbox's port opened as a URL on coved's port proxy. A private
 * port's requests need `token` (header X-Cove-Token, or once the query
 * parameter cove_token, which sets a cookie): `browserUrl` has it. */
export interface Port {
  port: number;
  url: string;
  token: string;
  public: boolean;
  browserUrl: string;
}

function portOf(j: any): Port {
  return {
    port: j.port, url: j.url, token: j.token, public: j.public,
    browserUrl: j.public ? j.url : `${j.url}?cove_token=${j.token}`,
  };
}

export interface LockOptions {
  /** Seconds the lock is held unless renewed (renewed while fn runs). */
  lease?: number;
  /** Give up waiting after this long: rejects with Conflict. Default: wait. */
  timeoutMs?: number;
}

export function clean<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

const capsCache = new WeakMap<Transport, Promise<any>>();

function capabilitiesOf(t: Transport): Promise<any> {
  let p = capsCache.get(t);
  if (!p) {
    p = t.call('GET', '/v1/capabilities');
    capsCache.set(t, p);
    p.catch(() => capsCache.delete(t));
  }
  return p;
}

export class Sandbox {
  readonly id: string;
  info: Record<string, any>;
  /** What this sandbox's backend supports. */
  readonly capabilities: Capabilities;
  private readonly t: Transport;
  private readonly base: string;
  private workspace?: string;

  /** @internal Use createSandbox or connectSandbox. */
  constructor(info: Record<string, any>, caps: any, transport: Transport) {
    this.t = transport;
    this.id = info.id;
    this.info = info;
    this.base = `/v1/sandboxes/${info.id}`;
    const c = caps?.backends?.[info.isolation ?? 'isolated']?.capabilities ?? caps?.capabilities ?? {};
    this.capabilities = { ports: Boolean(c.ports), nativeSnapshot: Boolean(c.nativeSnapshot), resume: Boolean(c.resume) };
  }

  /** @internal */
  static async of(info: Record<string, any>, t: Transport): Promise<Sandbox> {
    return new Sandbox(info, await capabilitiesOf(t), t);
  }

  /** The workspace as the files API names it: the sandbox's cwd, else
   * where a command starts (its user's home), asked once. In an external
   * sandbox (the host backend) file paths are inside its workspace folder,
   * whose top is "/". */
  async workdir(): Promise<string> {
    if (this.workspace === undefined) {
      this.workspace = this.info.isolation === 'external' ? '/' : this.info.cwd || (await this.exec('pwd')).stdout.trim() || '/';
    }
    return this.workspace as string;
  }

  /** A file path: an absolute one as it is; a relative one under the workspace. */
  async resolve(path: string): Promise<string> {
    if (path.startsWith('/')) return path;
    const ws = (await this.workdir()).replace(/\/+$/, '');
    return path === '' || path === '.' ? ws || '/' : `${ws}/${path}`;
  }

  /** A command's cwd: relative to the workspace too; an external sandbox's
   * commands see the host, where its workspace is a folder. */
  private async cwdOf(path: string): Promise<string> {
    if (path.startsWith('/') || this.info.isolation !== 'external') return this.resolve(path);
    return `${String(this.info.workspace).replace(/\/+$/, '')}/${path}`;
  }

  async refresh(): Promise<Record<string, any>> {
    this.info = await this.t.call('GET', this.base);
    return this.info;
  }

  async destroy(): Promise<void> {
    await this.t.call('DELETE', this.base);
  }

  /** Runs cmd (a shell string or an argv array) to its end. With onStdout
   * or onStderr, each chunk of output is passed to them as it comes. */
  async exec(cmd: string | string[], opts: ExecOptions = {}): Promise<ExecResult> {
    const req: Record<string, unknown> = clean({
      cmd, env: opts.env && clean(opts.env), user: opts.user,
      cwd: opts.cwd === undefined ? undefined : await this.cwdOf(opts.cwd),
      timeout: opts.timeoutMs === undefined ? undefined : opts.timeoutMs / 1000,
    });
    if (typeof opts.stdin === 'string') req.stdin = opts.stdin;
    else if (opts.stdin) req.stdin_b64 = Buffer.from(opts.stdin).toString('base64');
    if (!opts.onStdout && !opts.onStderr) return resultFromJson(await this.t.call('POST', `${this.base}/exec`, { json: req }));
    const res = await this.t.open('POST', `${this.base}/exec`, { query: { stream: 1 }, json: req });
    return readEvents(res, opts.onStdout, opts.onStderr);
  }

  private async fileQuery(path: string, more: Record<string, string | number | undefined> = {}) {
    return { path: await this.resolve(path), ...more };
  }

  /** Writes a string (UTF-8) or bytes, making missing parent folders. */
  async writeFile(path: string, data: string | Uint8Array, opts: { mode?: number } = {}): Promise<void> {
    const body = typeof data === 'string' ? Buffer.from(data) : data;
    const mode = opts.mode === undefined ? undefined : opts.mode.toString(8).padStart(4, '0');
    await this.t.call('PUT', `${this.base}/files`, { query: await this.fileQuery(path, { parents: 1, mode }), body });
  }

  /** The file's bytes, or null when there is no such file. */
  async readFile(path: string): Promise<Uint8Array | null> {
    const query = await this.fileQuery(path);
    let res;
    try {
      res = await this.t.open('GET', `${this.base}/files`, { query });
    } catch (e) {
      if (!(e instanceof NotFound)) throw e;
      await this.t.call('GET', this.base); // NotFound again if the sandbox itself is gone
      return null;
    }
    const data = await readAll(res);
    if ((res.headers['content-type'] ?? '').startsWith('application/json')) throw new TypeError(`${query.path} is a directory`);
    return new Uint8Array(data.buffer, data.byteOffset, data.length);
  }

  async readTextFile(path: string): Promise<string | null> {
    const b = await this.readFile(path);
    return b === null ? null : Buffer.from(b.buffer, b.byteOffset, b.length).toString('utf8');
  }

  /** Removes a file or a folder with all in it; no-op when missing. */
  async remove(path: string): Promise<void> {
    await this.t.call('DELETE', `${this.base}/files`, { query: await this.fileQuery(path, { recursive: 1 }) });
  }

  /** A folder's entries, `depth` levels down. */
  async list(path = '.', opts: { depth?: number } = {}): Promise<FileEntry[]> {
    const j = await this.t.call('GET', `${this.base}/files`, { query: await this.fileQuery(path, { depth: opts.depth }) });
    return j.entries;
  }

  /** Streams a local file into the sandbox (memory stays bounded). */
  async uploadFile(localPath: string, path: string): Promise<void> {
    const size = (await stat(localPath)).size;
    await this.t.call('PUT', `${this.base}/files`, {
      query: await this.fileQuery(path, { parents: 1 }), body: createReadStream(localPath, { highWaterMark: 1 << 20 }),
      headers: { 'Content-Length': String(size) },
    });
  }

  /** Streams a sandbox file to a local file; NotFound when it is missing. */
  async downloadFile(path: string, localPath: string): Promise<void> {
    const res = await this.t.open('GET', `${this.base}/files`, { query: await this.fileQuery(path) });
    await pipeline(res, createWriteStream(localPath));
  }

  /** Open `port` (a server in the sandbox, on any address or localhost
   * only) as a URL; again: the same URL and token, `public` as asked. */
  async exposePort(port: number, opts: { public?: boolean } = {}): Promise<Port> {
    return portOf(await this.t.call('POST', `${this.base}/ports`, { json: { port, public: Boolean(opts.public) } }));
  }

  async ports(): Promise<Port[]> {
    return (await this.t.call('GET', `${this.base}/ports`)).ports.map(portOf);
  }

  /** Its URL answers 404 from now on; open connections to it end. */
  async closePort(port: number): Promise<void> {
    await this.t.call('DELETE', `${this.base}/ports/${Math.trunc(port)}`);
  }

  /** The workspace's files as a portable, JSON-serializable value. */
  async snapshot(): Promise<PortableSnapshot> {
    return this.t.call('GET', `${this.base}/snapshot.json`);
  }

  async fork(n = 1): Promise<Sandbox[]> {
    const j = await this.t.call('POST', `${this.base}/fork`, { json: { count: n } });
    return Promise.all(j.sandboxes.map((s: any) => Sandbox.of(s, this.t)));
  }

  async checkpoint(label = ''): Promise<Checkpoint> {
    const j = await this.t.call('POST', `${this.base}/checkpoints`, { json: { label } });
    return { seq: j.seq, parent: j.parent ?? null, label: j.label ?? '', snapshot: j.snapshot, createdAt: j.created_at };
  }

  /** A new sandbox from checkpoint seq; this one is untouched. */
  async rollback(seq: number): Promise<Sandbox> {
    return Sandbox.of(await this.t.call('POST', `${this.base}/rollback`, { json: { seq } }), this.t);
  }

  async branch(seq: number, n = 1): Promise<Sandbox[]> {
    const j = await this.t.call('POST', `${this.base}/branch`, { json: { seq, count: n } });
    return Promise.all(j.sandboxes.map((s: any) => Sandbox.of(s, this.t)));
  }

  /** Runs fn holding the sandbox's lock `name` (coved's: exclusive among
   * every caller of lock(name) on this sandbox, in any process); waits
   * for it first; renews it while fn runs; releases it when fn settles. */
  async lock<T>(name: string, fn: () => T | Promise<T>, opts: LockOptions = {}): Promise<T> {
    const lease = opts.lease ?? 30;
    const deadline = opts.timeoutMs === undefined ? undefined : Date.now() + opts.timeoutMs;
    let token: string;
    for (;;) {
      const left = deadline === undefined ? 3600 : Math.max(0, (deadline - Date.now()) / 1000);
      try {
        token = (await this.t.call('POST', `${this.base}/locks`, { json: { name, lease, wait: Math.min(left, 3600) } })).token;
        break;
      } catch (e) {
        if (!(e instanceof Conflict) || (deadline !== undefined && Date.now() >= deadline)) throw e;
      }
    }
    const renew = setInterval(() => {
      this.t.call('POST', `${this.base}/locks/renew`, { json: { name, token, lease } }).catch(() => clearInterval(renew));
    }, (lease * 1000) / 3);
    try {
      return await fn();
    } finally {
      clearInterval(renew);
      await this.t.call('POST', `${this.base}/locks/release`, { json: { name, token } });
    }
  }
}

/** Creates and starts a sandbox; the caller destroys it. */
export async function createSandbox(opts: SandboxOptions = {}): Promise<Sandbox> {
  const { transport, template, ...spec } = opts;
  const t = transport ?? defaultTransport();
  const name = typeof template === 'object' ? template.name : template;
  const body = clean({ ...spec, template: name, env: spec.env && clean(spec.env) });
  return Sandbox.of(await t.call('POST', '/v1/sandboxes', { json: body }), t);
}

/** The sandbox with this ID; rejects with NotFound when there is none. */
export async function connectSandbox(id: string, opts: { transport?: Transport } = {}): Promise<Sandbox> {
  const t = opts.transport ?? defaultTransport();
  return Sandbox.of(await t.call('GET', `/v1/sandboxes/${encodeURIComponent(id)}`), t);
}

export async function listSandboxes(opts: { transport?: Transport } = {}): Promise<Sandbox[]> {
  const t = opts.transport ?? defaultTransport();
  const j = await t.call('GET', '/v1/sandboxes');
  return Promise.all(j.sandboxes.map((s: any) => Sandbox.of(s, t)));
}

/** A fresh sandbox holding a portable snapshot's files (deleted again if
 * the import fails). */
export async function restoreSandbox(value: PortableSnapshot, opts: SandboxOptions = {}): Promise<Sandbox> {
  const sb = await createSandbox(opts);
  try {
    await (sb as any).t.call('POST', `/v1/sandboxes/${sb.id}/snapshot.json`, { json: value });
  } catch (e) {
    await sb.destroy();
    throw e;
  }
  return sb;
}

/** An ephemeral sandbox: created, passed to fn, destroyed when fn settles
 * or throws. */
export async function withSandbox<T>(opts: SandboxOptions, fn: (sb: Sandbox) => T | Promise<T>): Promise<T> {
  const sb = await createSandbox(opts);
  try {
    return await fn(sb);
  } finally {
    await sb.destroy().catch((e) => { if (!(e instanceof NotFound)) throw e; });
  }
}
