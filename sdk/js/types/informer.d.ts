// Declarations for the wasm-informer JavaScript plugin SDK (src/informer.js),
// WIT `wasm-informer:plugin@0.2.1`, both worlds. The WIT declarations it
// builds on are generated into ./wit by gen-types.mjs.
/// <reference path="./wit/event-handler.d.ts" />
/// <reference path="./wit/controller.d.ts" />
import type {
  EventKind,
  EventInfo,
  ObjectReference,
  OwnerReference,
  Cause,
} from 'wasm-informer:plugin/types@0.2.1';
import type { Level } from 'wasm-informer:plugin/log@0.2.1';
import type { PatchType, Propagation } from 'wasm-informer:plugin/kube@0.2.1';
import type { EventType } from 'wasm-informer:plugin/events@0.2.1';
import type {
  Request as WitRequest,
  Action as WitAction,
} from 'wasm-informer:plugin/reconciler@0.2.1';

export type { EventKind, ObjectReference, OwnerReference, Cause, Level, PatchType, Propagation, EventType };

/** Writes one message to the host log. */
export function log(level: Level, message: unknown): void;
export function trace(message: unknown): void;
export function debug(message: unknown): void;
export function info(message: unknown): void;
export function warn(message: unknown): void;
export function error(message: unknown): void;

/** `metadata` as the host parsed it, with labels and annotations as plain objects. */
export interface ObjectMeta {
  namespace?: string;
  name: string;
  uid: string;
  resourceVersion: string;
  generation?: number;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  finalizers: string[];
  ownerReferences: OwnerReference[];
}

/**
 * A Kubernetes object held by the host, by reference. Each getter is one call
 * into the host, made the first time it is read. Valid only during the export
 * call that produced it: afterwards every getter throws.
 */
export class KubeObject {
  private constructor();
  /** False once the call that produced the object has returned. */
  readonly isOpen: boolean;
  /** `v1/pods`, `apps/v1/deployments`, ... */
  readonly resource: string;
  /** `namespace/name`, or `name` for cluster-scoped objects. */
  readonly key: string;
  readonly namespace: string | undefined;
  readonly name: string;
  readonly uid: string;
  readonly resourceVersion: string;
  readonly generation: number | undefined;
  readonly labels: Record<string, string>;
  readonly annotations: Record<string, string>;
  label(key: string): string | undefined;
  annotation(key: string): string | undefined;
  readonly meta: ObjectMeta;
  readonly deletionTimestamp: string | undefined;
  readonly finalizers: string[];
  readonly ownerReferences: OwnerReference[];
  /** The object as an Event's `regarding`. */
  readonly reference: ObjectReference;
  /** The whole object as compact JSON. */
  readonly json: string;
  /** The whole object, parsed: a copy that outlives the call. */
  readonly body: any;
  toJSON(): any;
}

/** One notification for one object. Valid during its call, like its objects. */
export class Event {
  private constructor();
  readonly kind: EventKind;
  readonly isInInitialList: boolean;
  readonly finalStateUnknown: boolean;
  /** The new state; for `deleted`, the last known state. */
  readonly object: KubeObject;
  /** The previous state of an update, when the host had it. */
  readonly old: KubeObject | undefined;
  readonly resource: string;
  readonly key: string;
}

export function isLive(event: Event): boolean;
export function isDeleted(event: Event): boolean;
/** True when the cache already holds another version of the event's object. Throws `CacheError`. */
export function isStale(event: Event): boolean;

/** A failed cache query; `kind` is the WIT `cache-error` case. */
export class CacheError extends Error {
  kind: 'forbidden' | 'unknown-resource' | 'invalid-selector' | 'unknown-index' | 'too-many-objects';
  detail: string;
}

export type ApiErrorKind =
  | 'forbidden'
  | 'not-found'
  | 'conflict'
  | 'already-exists'
  | 'invalid'
  | 'rate-limited'
  | 'timeout'
  | 'unavailable';

/** A failed API call (`kube`, `events`); `kind` is the WIT `api-error` case. */
export class ApiError extends Error {
  kind: ApiErrorKind;
  /** The server's (or the host's) message. */
  detail: string;
  /** The field causes of an `invalid` answer. */
  causes: Cause[];
}

export function isNotFound(e: unknown): e is ApiError;
export function isConflict(e: unknown): e is ApiError;

/** Queries against the host's shared cache; results are valid for the call. */
export const cache: {
  get(resource: string, key: string): KubeObject | undefined;
  list(resource: string, opts?: { namespace?: string | null; labelSelector?: string | null }): KubeObject[];
  byIndex(resource: string, indexName: string, value: string): KubeObject[];
  hasSynced(resource: string): boolean;
};

/** A patch: its form and its body (an object, or JSON text). */
export interface Patch {
  readonly type: PatchType;
  readonly body: unknown;
}
export const Patch: {
  merge(body: unknown): Patch;
  json(operations: unknown[] | string): Patch;
  strategicMerge(body: unknown): Patch;
  apply(body: unknown): Patch;
};

export interface DeleteOptions {
  uid?: string | null;
  resourceVersion?: string | null;
  propagation?: Propagation | null;
}

/** Options of `kube.apply`. */
export interface ApplyOptions {
  /** Take over fields another manager owns instead of throwing `conflict`. */
  force?: boolean;
  /**
   * Never create the object: when the host's cache does not hold it, throw
   * `ApiError` `not-found` and send nothing. Needs only `patch` in the grant
   * (an apply that may create needs `create` too). Use it for writes made
   * from an event: the object may be gone by the time the event is handled.
   */
  mustExist?: boolean;
}

type Namespace = string | null | undefined;

/** The Kubernetes API, as the manifest's `[[write]]` grants allow. Throws `ApiError`. */
export const kube: {
  get(resource: string, namespace: Namespace, name: string): KubeObject;
  create(resource: string, namespace: Namespace, body: unknown): KubeObject;
  replace(resource: string, namespace: Namespace, name: string, body: unknown): KubeObject;
  patch(resource: string, namespace: Namespace, name: string, patch: Patch, opts?: { force?: boolean }): KubeObject;
  /**
   * Server-side apply of the fully specified `intent` as `wasm-informer/PLUGIN`
   * (verb `patch`, and `create` too unless `mustExist`).
   */
  apply(resource: string, namespace: Namespace, name: string, intent: unknown, opts?: ApplyOptions): KubeObject;
  delete(resource: string, namespace: Namespace, name: string, opts?: DeleteOptions): KubeObject | undefined;
  getStatus(resource: string, namespace: Namespace, name: string): KubeObject;
  replaceStatus(resource: string, namespace: Namespace, name: string, body: unknown): KubeObject;
  patchStatus(
    resource: string,
    namespace: Namespace,
    name: string,
    patch: Patch,
    opts?: { force?: boolean },
  ): KubeObject;
  dryRun(): boolean;
};

/** Kubernetes Events about objects (needs `events = true`). Throws `ApiError`. */
export const events: {
  publish(event: {
    regarding: KubeObject | ObjectReference;
    type: EventType;
    reason: string;
    action: string;
    note?: string;
  }): void;
  normal(regarding: KubeObject | ObjectReference, reason: string, action: string, note?: string): void;
  warning(regarding: KubeObject | ObjectReference, reason: string, action: string, note?: string): void;
};

/** A plugin of world `event-handler`; each event goes to its kind's method, else to `onEvent`. */
export interface Plugin {
  /** Receives the manifest's [config] table, parsed. Throw to refuse it. */
  init?(config: Record<string, unknown>): void;
  onAdd?(event: Event): void;
  onUpdate?(event: Event): void;
  onDelete?(event: Event): void;
  onSync?(event: Event): void;
  onEvent?(event: Event): void;
}

/** The exported WIT `handler` interface built from a plugin object. */
export function definePlugin(plugin: Plugin): {
  init(config: string): void;
  onEvent(event: EventInfo): void;
};

/** What to do after a successful reconcile. */
export type Action = WitAction;
export const Action: {
  done(): Action;
  requeueAfter(ms: number): Action;
};

/** A failed reconcile: retried with backoff unless terminal. */
export class ReconcileError extends Error {
  constructor(message: string, opts?: { terminal?: boolean });
  terminal: boolean;
  static retry(message: string): ReconcileError;
  static terminal(message: string): ReconcileError;
}

/** The key to reconcile. */
export class Request {
  private constructor();
  readonly resource: string;
  readonly namespace: string | undefined;
  readonly name: string;
  readonly key: string;
  /** The cached state, or `undefined` when the object is gone. */
  object(): KubeObject | undefined;
}

/** A controller of world `controller`. */
export interface Controller {
  init?(config: Record<string, unknown>): void;
  /** Returns an Action (nothing means done); throw to fail (a ReconcileError.terminal is not retried). */
  reconcile(request: Request): Action | void;
}

/** The exported WIT `reconciler` interface built from a controller object. */
export function defineController(controller: Controller): {
  init(config: string): void;
  reconcile(request: WitRequest): WitAction;
};

/**
 * Runs `apply` or `cleanup` under the finalizer `name`, adding and removing it as needed: the
 * finalizer is removed only when `cleanup` returns done (a requeue keeps it); under dry run
 * `apply` follows the add at once, and an object being deleted without the finalizer gets
 * `cleanup` (see `finalizer` in informer.js).
 */
export function finalizer(
  request: Request,
  name: string,
  steps: { apply(object: KubeObject): Action | void; cleanup(object: KubeObject): Action | void },
): Action | void;
