// cove: TypeScript client for cove's sandboxes (coved's REST API).
export { createSandbox, connectSandbox, listSandboxes, restoreSandbox, withSandbox, Sandbox } from './sandbox.js';
export type { SandboxOptions, ExecOptions, Capabilities, FileEntry, PortableSnapshot, Checkpoint, LockOptions, ReadyCheck, Port } from './sandbox.js';
export { createTemplate, getTemplate, listTemplates, Template } from './template.js';
export type { TemplateOptions, PoolState } from './template.js';
export type { ExecResult, OutputCallback } from './exec.js';
export { Transport, defaultTransport, resetDefaultTransport, DEFAULT_SOCKET } from './transport.js';
export type { TransportOptions } from './transport.js';
export { CoveError, BadRequest, Unauthorized, NotFound, Conflict, Unavailable } from './errors.js';
export { listImages, getImage, importImage, pullImage, deleteImage, pruneImages } from './image.js';
export type { ImageInfo, ImageConfig, PullProgress } from './image.js';
