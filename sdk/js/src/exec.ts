// Exec results and the NDJSON event streams of exec and attach.
import type { IncomingMessage } from 'node:http';
import { CoveError } from './errors.js';

export interface ExecResult {
  /** The exit status; null when a signal ended the process. */
  exitCode: number | null;
  stdout: string;
  stderr: string;
  /** "KILL", "TERM"... (without "SIG") when a signal ended it. */
  signal: string | null;
  timedOut: boolean;
  durationMs?: number;
}

export type OutputCallback = (chunk: string) => void;

/** A result's or event's text: `key`, or `key`_b64 (output that is not
 * UTF-8) decoded with replacement characters. */
function text(obj: any, key: string): string {
  const v = obj[key];
  if ((v === null || v === undefined) && typeof obj[`${key}_b64`] === 'string') return Buffer.from(obj[`${key}_b64`], 'base64').toString('utf8');
  return v ?? '';
}

export function resultFromJson(j: any, stdout = text(j, 'stdout'), stderr = text(j, 'stderr')): ExecResult {
  return { exitCode: j.exit_code ?? null, stdout, stderr, signal: j.signal ?? null, timedOut: Boolean(j.timed_out), durationMs: j.duration_ms };
}

/** Reads an event stream to its `exit` event, passing each chunk of output
 * to the callbacks as it arrives; resolves to the result with all of it. */
export async function readEvents(res: IncomingMessage, onStdout?: OutputCallback, onStderr?: OutputCallback): Promise<ExecResult> {
  const out: string[] = [];
  const err: string[] = [];
  let buf = '';
  res.setEncoding('utf8');
  for await (const piece of res) {
    buf += piece as string;
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (!line.trim()) continue;
      const ev = JSON.parse(line);
      if (ev.type === 'stdout' || ev.type === 'stderr') {
        const chunk = text(ev, 'data');
        (ev.type === 'stdout' ? out : err).push(chunk);
        (ev.type === 'stdout' ? onStdout : onStderr)?.(chunk);
      } else if (ev.type === 'exit') {
        res.resume(); // the rest (nothing) is drained; the connection is reused
        return resultFromJson(ev, out.join(''), err.join(''));
      } else if (ev.type === 'error') {
        throw new CoveError(ev.error?.code ?? 'exec_failed', ev.error?.message ?? ev.message ?? '');
      }
    }
  }
  throw new CoveError('stream_ended', 'the event stream ended before the exit event');
}
