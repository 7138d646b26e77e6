// The transport: HTTP/1.1 to coved over its unix socket (default) or over
// TCP with the API token, as the cove CLI does (COVE_SOCKET, COVE_HOST,
// COVE_TOKEN). Connections are kept alive and reused (one http.Agent).
import * as http from 'node:http';
import { readFileSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Unavailable, errorFromResponse } from './errors.js';

export const DEFAULT_SOCKET = '/run/cove/cove.sock';

export interface TransportOptions {
  /** Unix socket of coved (default COVE_SOCKET, else /run/cove/cove.sock). */
  socketPath?: string;
  /** ADDR:PORT of a coved on TCP (default COVE_HOST); needs a token. */
  host?: string;
  /** The API token (default COVE_TOKEN). */
  token?: string;
  /** A file holding the token (its first line). */
  tokenFile?: string;
}

export interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  json?: unknown;
  body?: Uint8Array | Readable;
  headers?: Record<string, string>;
}

function splitHost(addr: string): [string, number] {
  const i = addr.lastIndexOf(':');
  const port = Number(addr.slice(i + 1));
  if (i <= 0 || !Number.isInteger(port) || port <= 0) throw new TypeError(`COVE_HOST/host must be ADDR:PORT, not '${addr}'`);
  return [addr.slice(0, i).replace(/^\[|\]$/g, ''), port];
}

export class Transport {
  readonly socketPath: string;
  readonly host?: string;
  private readonly token?: string;
  private readonly tcp?: [string, number];
  private readonly agent = new http.Agent({ keepAlive: true });

  constructor(opts: TransportOptions = {}) {
    const env = process.env;
    this.host = opts.host ?? (env.COVE_HOST || undefined);
    let token = opts.token;
    if (token === undefined && opts.tokenFile) token = readFileSync(opts.tokenFile, 'utf8').split(/\r?\n/)[0].trimEnd();
    this.token = token ?? env.COVE_TOKEN;
    this.socketPath = opts.socketPath ?? (env.COVE_SOCKET || DEFAULT_SOCKET);
    if (this.host) {
      this.tcp = splitHost(this.host);
      if (!this.token) throw new TypeError('a TCP host needs the API token: set COVE_TOKEN or pass token');
    }
  }

  /** Closes the kept-alive connections. */
  close(): void {
    this.agent.destroy();
  }

  /** Sends a request; resolves to the response with its body unread (the
   * caller reads or discards it). An error status rejects with the typed
   * error. */
  open(method: string, path: string, opts: RequestOptions = {}): Promise<http.IncomingMessage> {
    if (opts.query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(opts.query)) if (v !== undefined) q.set(k, String(v));
      path += '?' + q.toString();
    }
    const headers: Record<string, string> = { ...opts.headers };
    let body: Uint8Array | Readable | undefined = opts.body;
    if (opts.json !== undefined) {
      body = Buffer.from(JSON.stringify(opts.json));
      headers['Content-Type'] = 'application/json';
    }
    if (body instanceof Uint8Array) headers['Content-Length'] = String(body.length);
    else if (body === undefined && (method === 'POST' || method === 'PUT')) headers['Content-Length'] = '0';
    if (this.host) headers.Authorization = `Bearer ${this.token}`;
    const where = this.tcp ? { host: this.tcp[0], port: this.tcp[1] } : { socketPath: this.socketPath };
    return new Promise((resolve, reject) => {
      const req = http.request({ ...where, method, path, headers, agent: this.agent }, (res) => {
        const status = res.statusCode ?? 0;
        if (status < 400) return resolve(res);
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => reject(errorFromResponse(status, Buffer.concat(chunks))));
        res.on('error', reject);
      });
      req.on('error', (e: Error) => reject(new Unavailable('unavailable', `coved at ${this.host ?? this.socketPath}: ${e.message}`)));
      if (body === undefined || body instanceof Uint8Array) req.end(body);
      else pipeline(body, req).catch((e: Error) => { req.destroy(e); });
    });
  }

  /** A request whose answer is JSON: resolves to it parsed. */
  async call<T = any>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const res = await this.open(method, path, opts);
    const data = await readAll(res);
    return (data.length ? JSON.parse(data.toString('utf8')) : null) as T;
  }
}

export async function readAll(res: http.IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of res) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

let shared: Transport | undefined;

/** The process-wide transport from the environment, made on first use. */
export function defaultTransport(): Transport {
  shared ??= new Transport();
  return shared;
}

/** Forgets the process-wide transport (it is made again from the
 * environment on next use). */
export function resetDefaultTransport(): void {
  shared?.close();
  shared = undefined;
}
