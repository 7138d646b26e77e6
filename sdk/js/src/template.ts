// Templates over coved's REST API: named starting points for sandboxes
// (an image or a snapshot with limits, env, user, network, a start command
// and a readiness check), each with an optional warm pool of sandboxes
// started ahead of time.
import { clean, createSandbox, type ReadyCheck, type Sandbox, type SandboxOptions } from './sandbox.js';
import { Transport, defaultTransport } from './transport.js';

export interface TemplateOptions {
  image?: string;
  /** A snapshot's ID: its files and spec under the template's fields. */
  fromSnapshot?: string;
  memory?: number | string;
  cpus?: number;
  pids?: number;
  disk?: number | string;
  env?: Record<string, string | undefined>;
  cwd?: string;
  user?: string;
  network?: 'egress' | 'none';
  allow_out?: string[];
  deny_out?: string[];
  start?: string | string[];
  ready?: ReadyCheck;
  /** Seconds. */
  idleTimeout?: number;
  /** Sandboxes kept started and ready (0 to 64). */
  warm?: number;
  transport?: Transport;
}

export interface PoolState {
  size: number;
  ready: number;
  starting: number;
}

export class Template {
  readonly name: string;
  info: Record<string, any>;
  private readonly t: Transport;

  /** @internal Use createTemplate or getTemplate. */
  constructor(info: Record<string, any>, transport: Transport) {
    this.name = info.name;
    this.info = info;
    this.t = transport;
  }

  /** Its warm pool, as last fetched. */
  get pool(): PoolState {
    return this.info.pool;
  }

  async refresh(): Promise<Record<string, any>> {
    this.info = await this.t.call('GET', `/v1/templates/${encodeURIComponent(this.name)}`);
    return this.info;
  }

  /** A new sandbox from it; opts override its fields. */
  sandbox(opts: Omit<SandboxOptions, 'template'> = {}): Promise<Sandbox> {
    return createSandbox({ transport: this.t, ...opts, template: this.name });
  }

  /** Its warm pool goes too; the sandboxes made from it stay. */
  async delete(): Promise<void> {
    await this.t.call('DELETE', `/v1/templates/${encodeURIComponent(this.name)}`);
  }
}

export async function createTemplate(name: string, opts: TemplateOptions = {}): Promise<Template> {
  const { transport, fromSnapshot, idleTimeout, ...rest } = opts;
  const t = transport ?? defaultTransport();
  const body = clean({ name, ...rest, from_snapshot: fromSnapshot, idle_timeout: idleTimeout, env: rest.env && clean(rest.env) });
  return new Template(await t.call('POST', '/v1/templates', { json: body }), t);
}

/** Rejects with NotFound when there is none. */
export async function getTemplate(name: string, opts: { transport?: Transport } = {}): Promise<Template> {
  const t = opts.transport ?? defaultTransport();
  return new Template(await t.call('GET', `/v1/templates/${encodeURIComponent(name)}`), t);
}

export async function listTemplates(opts: { transport?: Transport } = {}): Promise<Template[]> {
  const t = opts.transport ?? defaultTransport();
  return (await t.call('GET', '/v1/templates')).templates.map((j: any) => new Template(j, t));
}
