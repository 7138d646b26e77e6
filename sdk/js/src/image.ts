// cove's OCI images: import (an OCI image layout or a docker archive, as a
// tar), pull from a registry with progress, build from a Dockerfile, list,
// get, delete, prune.
import { execFileSync } from 'node:child_process';
import { createReadStream, statSync } from 'node:fs';
import { CoveError } from './errors.js';
import { Transport, defaultTransport, readAll } from './transport.js';

export interface ImageConfig {
  env: string[];
  working_dir: string | null;
  user: string | null;
  entrypoint: string[];
  cmd: string[];
  exposed_ports: string[];
  labels: Record<string, string>;
}

export interface ImageInfo {
  id: string;
  names: string[];
  created_at: number;
  source?: 'import' | 'pull' | 'build';
  layers: number;
  chain_id: string;
  config: ImageConfig;
  users?: { sandboxes: string[]; snapshots: string[]; templates: number };
  in_use?: boolean;
}

/** A pull's progress: one layer's bytes and where it is. */
export interface PullProgress {
  digest: string;
  done: number;
  total: number;
  status: 'waiting' | 'downloading' | 'verified' | 'exists' | 'unpacked';
}

const path = (ref: string) => `/v1/images/${encodeURIComponent(ref)}`;

export async function listImages(opts: { transport?: Transport } = {}): Promise<ImageInfo[]> {
  const t = opts.transport ?? defaultTransport();
  return (await t.call('GET', '/v1/images')).images;
}

/** By name, ID or 12+ hex digits of its ID; rejects with NotFound. */
export async function getImage(ref: string, opts: { transport?: Transport } = {}): Promise<ImageInfo> {
  return (opts.transport ?? defaultTransport()).call('GET', path(ref));
}

/** archive: the tar's bytes, or the path of a tar file (streamed). */
export async function importImage(archive: Uint8Array | string, opts: { name?: string; transport?: Transport } = {}): Promise<ImageInfo> {
  const t = opts.transport ?? defaultTransport();
  const query = { name: opts.name };
  if (typeof archive !== 'string') return t.call('POST', '/v1/images', { query, body: archive });
  const headers = { 'Content-Length': String(statSync(archive).size) };
  return t.call('POST', '/v1/images', { query, body: createReadStream(archive), headers });
}

/** Pulls ref from its registry; onProgress hears of each layer. */
export async function pullImage(ref: string, opts: { onProgress?: (p: PullProgress) => void; transport?: Transport } = {}): Promise<ImageInfo> {
  const t = opts.transport ?? defaultTransport();
  const res = await t.open('POST', '/v1/images/pull', { json: { ref } });
  return events(res, (ev) => { if (ev.type === 'layer') opts.onProgress?.(ev as PullProgress); }, 'pull');
}

/** One event of a build: a step starting, RUN's output, a step's end. */
export interface BuildEvent {
  type: 'step' | 'output' | 'step_done';
  step?: number;
  total?: number;
  line?: number;
  instruction?: string;
  stream?: 'stdout' | 'stderr';
  data?: string;
  cached?: boolean;
  layer?: string;
}

export interface BuildOptions {
  tag?: string;
  /** The Dockerfile's path in the context (default "Dockerfile"). */
  dockerfile?: string;
  buildArgs?: Record<string, string>;
  onEvent?: (e: BuildEvent) => void;
  transport?: Transport;
}

/** Builds an image from a Dockerfile. context: a folder (sent as a tar made
 * by the system's tar; coved honours its .dockerignore) or a tar's bytes.
 * A bad Dockerfile rejects with BadRequest naming its line; a failed step
 * with the build's error. */
export async function buildImage(context: Uint8Array | string, opts: BuildOptions = {}): Promise<ImageInfo> {
  const t = opts.transport ?? defaultTransport();
  const body = typeof context === 'string' ? execFileSync('tar', ['-C', context, '-cf', '-', '.'], { maxBuffer: 1 << 30 }) : context;
  const query = { tag: opts.tag, dockerfile: opts.dockerfile, build_args: opts.buildArgs ? JSON.stringify(opts.buildArgs) : undefined };
  const res = await t.open('POST', '/v1/images/build', { query, body });
  return events(res, (ev) => opts.onEvent?.(ev as BuildEvent), 'build');
}

/** An NDJSON stream of events, the image last (or an error line). */
async function events(res: AsyncIterable<unknown>, each: (ev: any) => void, what: string): Promise<ImageInfo> {
  let image: ImageInfo | undefined;
  let failure: CoveError | undefined;
  let rest = '';
  const line = (text: string) => {
    if (!text) return;
    const ev = JSON.parse(text);
    if (ev.type === 'image') image = ev.image;
    else if (ev.type === 'error') failure = new CoveError(ev.error?.code ?? 'internal', ev.error?.message ?? '');
    else each(ev);
  };
  for await (const chunk of res) {
    const lines = (rest + (chunk as Buffer).toString('utf8')).split('\n');
    rest = lines.pop() ?? '';
    lines.forEach(line);
  }
  line(rest);
  if (failure) throw failure;
  if (!image) throw new CoveError('unavailable', `the ${what}'s stream ended early`);
  return image;
}

/** Rejects with Conflict while a sandbox, snapshot or template uses it. */
export async function deleteImage(ref: string, opts: { transport?: Transport } = {}): Promise<void> {
  await readAll(await (opts.transport ?? defaultTransport()).open('DELETE', path(ref)));
}

/** Deletes the images nothing uses (all: named ones too); their IDs. */
export async function pruneImages(opts: { all?: boolean; transport?: Transport } = {}): Promise<string[]> {
  const t = opts.transport ?? defaultTransport();
  return (await t.call('POST', '/v1/images/prune', { json: { all: opts.all ?? false } })).deleted;
}
