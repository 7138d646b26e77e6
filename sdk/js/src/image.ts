// cove's OCI images: import (an OCI image layout or a docker archive, as a
// tar), pull from a registry with progress, list, get, delete, prune.
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
  source?: 'import' | 'pull';
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
  let image: ImageInfo | undefined;
  let failure: CoveError | undefined;
  let rest = '';
  const line = (text: string) => {
    if (!text) return;
    const ev = JSON.parse(text);
    if (ev.type === 'layer') opts.onProgress?.(ev as PullProgress);
    else if (ev.type === 'image') image = ev.image;
    else if (ev.type === 'error') failure = new CoveError(ev.error?.code ?? 'internal', ev.error?.message ?? '');
  };
  for await (const chunk of res) {
    const lines = (rest + (chunk as Buffer).toString('utf8')).split('\n');
    rest = lines.pop() ?? '';
    lines.forEach(line);
  }
  line(rest);
  if (failure) throw failure;
  if (!image) throw new CoveError('unavailable', "the pull's stream ended early");
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
