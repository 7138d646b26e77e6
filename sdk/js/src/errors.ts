// Typed errors carrying cove's error code and message
// ({"error": {"code", "message"}} with the HTTP status).

export class CoveError extends Error {
  readonly code: string;
  readonly status: number;
  constructor(code: string, message: string, status = 0) {
    super(`${code}: ${message}`);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
  }
}

/** 400, 413, 431: refused; nothing changed. */
export class BadRequest extends CoveError {}
/** 401, 403: no or a wrong token, or not allowed. */
export class Unauthorized extends CoveError {}
/** 404: no such sandbox, snapshot, process or path. */
export class NotFound extends CoveError {}
/** 409: a lock is held, a tag is taken... */
export class Conflict extends CoveError {}
/** coved cannot be reached, or is full for now (429, 503), or its disk is (507). */
export class Unavailable extends CoveError {}

const byStatus: Record<number, typeof CoveError> = {
  400: BadRequest, 413: BadRequest, 431: BadRequest, 401: Unauthorized, 403: Unauthorized,
  404: NotFound, 409: Conflict, 429: Unavailable, 503: Unavailable, 507: Unavailable,
};

export function errorFromResponse(status: number, body: Buffer): CoveError {
  let code = `http_${status}`;
  let message = '';
  try {
    const e = JSON.parse(body.toString('utf8')).error;
    code = e.code ?? code;
    message = e.message ?? '';
  } catch {
    message = body.subarray(0, 200).toString('utf8');
  }
  const Cls = byStatus[status] ?? CoveError;
  return new Cls(code, message, status);
}
