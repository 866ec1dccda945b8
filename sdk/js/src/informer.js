// wasm-informer plugin SDK for JavaScript, over the WIT imports of
// `wasm-informer:plugin@0.2.1`: objects read by reference with lazy,
// memoised getters; event dispatch (`onAdd`/`onUpdate`/`onDelete`/`onSync`);
// cache queries; writes to the cluster (`kube`, with server-side `apply`
// that may be told never to create); Kubernetes Events (`events`);
// and the `controller` world's reconciler.
//
// Invariants:
// - nothing here throws into the host except through `definePlugin` and
//   `defineController`, which turn every exception into the `err` result of the
//   export (a handler error or a reconcile error, never a trap);
// - an object is a reference the host hands out for one call into the plugin
//   (the event's objects, cache results, API answers); the host forgets them
//   all when the call returns, and reading a forgotten one would trap the
//   instance. Every KubeObject remembers the call that produced it, and once
//   that call has returned, reading it throws a clear error instead (before
//   any host call). Copy what must outlive the call (`obj.body`, a field).
//   There is nothing to release: references hold nothing in the host after
//   their call.
//
// The plugin source imports this file by relative path; componentize-js
// bundles it into the component (see sdk/js/build.mjs).
import * as witObjects from 'wasm-informer:plugin/objects@0.2.1';
import * as witCache from 'wasm-informer:plugin/cache@0.2.1';
import * as witKube from 'wasm-informer:plugin/kube@0.2.1';
import { publish as witPublish } from 'wasm-informer:plugin/events@0.2.1';
import { log as witLog } from 'wasm-informer:plugin/log@0.2.1';

// ---- logging ----------------------------------------------------------------

/** Writes one message to the host log at `level` ('trace'..'error'). */
export function log(level, message) {
  witLog(level, String(message));
}
/** Logs at trace level. */
export const trace = (message) => log('trace', message);
/** Logs at debug level. */
export const debug = (message) => log('debug', message);
/** Logs at info level. */
export const info = (message) => log('info', message);
/** Logs at warn level. */
export const warn = (message) => log('warn', message);
/** Logs at error level. */
export const error = (message) => log('error', message);

// ---- the call --------------------------------------------------------------

// Counts the export calls that have returned: an object made during the call
// numbered `call` is valid while `call === calls`.
let calls = 0;

function endCall() {
  calls++;
}

// ---- objects ------------------------------------------------------------------

function pairsToObject(pairs) {
  const out = {};
  for (const [k, v] of pairs) out[k] = v;
  return out;
}

function toNumber(big) {
  return big === undefined ? undefined : Number(big);
}

const CLOSED =
  'is used after the call that obtained it returned (objects are valid for one call; ' +
  'copy what you need, for example obj.body or obj.name, before returning)';

/**
 * A Kubernetes object held by the host, by reference. Each getter is one call
 * into the host that copies only what it returns, made the first time it is
 * read and remembered after. Valid until the export call that produced it
 * returns.
 */
export class KubeObject {
  constructor(ref) {
    this._ref = ref;
    this._call = calls;
    this._memo = {};
  }

  _r() {
    if (this._call !== calls) {
      throw new Error(`KubeObject ${this._memo.key ?? '(key not read)'} ${CLOSED}`);
    }
    return this._ref;
  }

  _get(field, read) {
    const r = this._r();
    const memo = this._memo;
    if (field in memo) return memo[field];
    const v = read(r);
    memo[field] = v;
    return v;
  }

  /** False once the call that produced the object has returned. */
  get isOpen() {
    return this._call === calls;
  }

  /** The resource id, for example `v1/pods` or `apps/v1/deployments`. */
  get resource() {
    return this._get('resource', witObjects.resource);
  }
  /** The cache key: `namespace/name`, or `name` for cluster-scoped objects. */
  get key() {
    return this._get('key', witObjects.key);
  }
  /** `metadata.namespace`; `undefined` for cluster-scoped objects. */
  get namespace() {
    return this._get('namespace', witObjects.namespace);
  }
  /** `metadata.name`. */
  get name() {
    return this._get('name', witObjects.name);
  }
  /** `metadata.uid`. */
  get uid() {
    return this._get('uid', witObjects.uid);
  }
  /** `metadata.resourceVersion`. */
  get resourceVersion() {
    return this._get('resourceVersion', witObjects.resourceVersion);
  }
  /** `metadata.generation` as a number, when the object has one. */
  get generation() {
    return this._get('generation', (r) => toNumber(witObjects.generation(r)));
  }
  /** Every label, as a plain object. */
  get labels() {
    return this._get('labels', (r) => pairsToObject(witObjects.labels(r)));
  }
  /** Every annotation, as a plain object. */
  get annotations() {
    return this._get('annotations', (r) => pairsToObject(witObjects.annotations(r)));
  }
  /** The value of one label, or `undefined`. */
  label(key) {
    const r = this._r();
    const all = this._memo.labels;
    if (all !== undefined) return Object.hasOwn(all, key) ? all[key] : undefined;
    return witObjects.label(r, String(key));
  }
  /** The value of one annotation, or `undefined`. */
  annotation(key) {
    const r = this._r();
    const all = this._memo.annotations;
    if (all !== undefined) return Object.hasOwn(all, key) ? all[key] : undefined;
    return witObjects.annotation(r, String(key));
  }
  /**
   * Everything the host parsed of `metadata`, in one call: `namespace`,
   * `name`, `uid`, `resourceVersion`, `generation` (a number), `labels` and
   * `annotations` (plain objects), `creationTimestamp`, `deletionTimestamp`,
   * `finalizers`, `ownerReferences`.
   */
  get meta() {
    return this._get('meta', (r) => {
      const m = witObjects.meta(r);
      return {
        ...m,
        generation: toNumber(m.generation),
        labels: pairsToObject(m.labels),
        annotations: pairsToObject(m.annotations),
      };
    });
  }
  /** `metadata.deletionTimestamp`: set while finalizers hold a deleted object. */
  get deletionTimestamp() {
    return this.meta.deletionTimestamp;
  }
  /** `metadata.finalizers`. */
  get finalizers() {
    return this.meta.finalizers;
  }
  /** `metadata.ownerReferences`. */
  get ownerReferences() {
    return this.meta.ownerReferences;
  }
  /** This object as an Event's `regarding`: `{apiVersion, kind, namespace, name, uid}`. */
  get reference() {
    return this._get('reference', witObjects.reference);
  }
  /** The whole object as compact JSON text. */
  get json() {
    return this._get('json', witObjects.json);
  }
  /** The whole object, parsed (the same value on every read; a copy that outlives the call). */
  get body() {
    return this._get('body', () => JSON.parse(this.json));
  }
  /** `JSON.stringify(obj)` gives the object's JSON. */
  toJSON() {
    return this.body;
  }
}

function wrap(ref) {
  return ref === undefined ? undefined : new KubeObject(ref);
}

function wrapList(refs) {
  const out = new Array(refs.length);
  for (let i = 0; i < refs.length; i++) out[i] = new KubeObject(refs[i]);
  return out;
}

// ---- events ------------------------------------------------------------------

/**
 * One notification for one object. `object` is the new state (for a delete,
 * the last known state); `old` the previous state of an update, when the host
 * still had it. Both are valid for the call.
 */
export class Event {
  constructor(info) {
    this.kind = info.kind;
    this.isInInitialList = info.isInInitialList;
    this.finalStateUnknown = info.finalStateUnknown;
    this._info = info;
    this._call = calls;
    this._object = undefined;
    this._old = undefined;
  }
  _wrap(ref) {
    if (this._call !== calls) throw new Error(`the event's object ${CLOSED}`);
    return new KubeObject(ref);
  }
  /** The new state (for `deleted`, the last known state). */
  get object() {
    return (this._object ??= this._wrap(this._info.object));
  }
  /** The previous state of an update, when the host had it; otherwise `undefined`. */
  get old() {
    const r = this._info.oldObject;
    if (r === undefined) return undefined;
    return (this._old ??= this._wrap(r));
  }
  /** The resource id, for example `v1/pods`. */
  get resource() {
    return this.object.resource;
  }
  /** The cache key: `namespace/name` or `name`. */
  get key() {
    return this.object.key;
  }
}

/** True for `added`, `updated` and `synced`: the object exists after this event. */
export function isLive(event) {
  return event.kind !== 'deleted';
}

/** True for `deleted` events. */
export function isDeleted(event) {
  return event.kind === 'deleted';
}

/**
 * True when the cache already holds another version of the event's object
 * than the event itself, i.e. a later event for the same key is queued.
 * Level-based handlers may skip such events. Deletes are never stale.
 * Throws `CacheError`.
 */
export function isStale(event) {
  if (event.kind === 'deleted') return false;
  const o = event.object;
  const current = cacheCall(`get ${o.resource} ${o.key}`, () => witCache.get(o.resource, o.key));
  return current !== undefined && witObjects.resourceVersion(current) !== o.resourceVersion;
}

// ---- errors ------------------------------------------------------------------

/**
 * A failed cache query. `kind` is the WIT `cache-error` case: 'forbidden',
 * 'unknown-resource', 'invalid-selector', 'unknown-index' or
 * 'too-many-objects' (the answer would reference more objects than one call
 * may: narrow the query).
 */
export class CacheError extends Error {
  constructor(kind, detail, query) {
    super(`cache ${query}: ${kind}: ${detail}`);
    this.name = 'CacheError';
    this.kind = kind;
    this.detail = detail;
  }
}

/**
 * A failed API call (`kube`, `events`). `kind` is the WIT `api-error` case:
 * 'forbidden', 'not-found', 'conflict', 'already-exists', 'invalid',
 * 'rate-limited', 'timeout' or 'unavailable'; `detail` the server's (or the
 * host's) message; `causes` the `invalid` answer's field causes.
 */
export class ApiError extends Error {
  constructor(kind, detail, call, causes = []) {
    const why = causes.length
      ? `${detail} (${causes.map((c) => `${c.field}: ${c.message}`).join('; ')})`
      : detail;
    super(`${call}: ${kind}: ${why}`);
    this.name = 'ApiError';
    this.kind = kind;
    this.detail = detail;
    this.causes = causes;
  }
}

/** True when `e` is an `ApiError` of kind `not-found`. */
export function isNotFound(e) {
  return e instanceof ApiError && e.kind === 'not-found';
}

/** True when `e` is an `ApiError` of kind `conflict`. */
export function isConflict(e) {
  return e instanceof ApiError && e.kind === 'conflict';
}

// componentize-js turns the `err` of an imported function into a thrown error
// whose `payload` is the WIT variant `{ tag, val }`.
function variantOf(e) {
  const p = e && e.payload;
  return p && typeof p.tag === 'string' ? p : undefined;
}

function cacheCall(query, fn) {
  try {
    return fn();
  } catch (e) {
    const p = variantOf(e);
    if (p?.tag === 'too-many-objects') {
      throw new CacheError(p.tag, `one call may reference at most ${p.val} objects; narrow the query`, query);
    }
    if (p) throw new CacheError(p.tag, p.val, query);
    throw e;
  }
}

function apiCall(call, fn) {
  try {
    return fn();
  } catch (e) {
    const p = variantOf(e);
    if (p) {
      if (p.tag === 'invalid') throw new ApiError(p.tag, p.val.message, call, p.val.causes);
      throw new ApiError(p.tag, p.val, call);
    }
    throw e;
  }
}

// ---- cache -------------------------------------------------------------------

/** Queries against the host's shared cache. Results are valid for the call. */
export const cache = {
  /** One object by resource id and key, or `undefined`. Throws `CacheError`. */
  get(resource, key) {
    return wrap(cacheCall(`get ${resource} ${key}`, () => witCache.get(resource, key)));
  },
  /**
   * Objects of `resource`, optionally in one `namespace` and matching a
   * Kubernetes `labelSelector`. Throws `CacheError`.
   */
  list(resource, { namespace, labelSelector } = {}) {
    return wrapList(
      cacheCall(`list ${resource}`, () =>
        witCache.list(resource, namespace ?? undefined, labelSelector ?? undefined),
      ),
    );
  },
  /** Objects whose value of index `indexName` equals `value`. Throws `CacheError`. */
  byIndex(resource, indexName, value) {
    return wrapList(
      cacheCall(`by-index ${resource} ${indexName}`, () =>
        witCache.byIndex(resource, indexName, value),
      ),
    );
  },
  /** Whether the informer for `resource` finished its first list. Throws `CacheError`. */
  hasSynced(resource) {
    return cacheCall(`has-synced ${resource}`, () => witCache.hasSynced(resource));
  },
};

// ---- kube --------------------------------------------------------------------

const PATCH_TYPES = new Set(['merge', 'json', 'strategic-merge', 'apply']);
const PROPAGATIONS = new Set(['orphan', 'background', 'foreground']);

/** A patch: its form and its body. Build one with `Patch.merge(...)` etc. */
export const Patch = {
  /** RFC 7386 JSON merge patch: `null` deletes a field. */
  merge: (body) => Object.freeze({ type: 'merge', body }),
  /** RFC 6902 JSON patch: an array of operations. */
  json: (operations) => Object.freeze({ type: 'json', body: operations }),
  /** Kubernetes strategic merge patch: lists merge by key (containers by name, ...). */
  strategicMerge: (body) => Object.freeze({ type: 'strategic-merge', body }),
  /**
   * Server-side apply: the fully specified intent (with `apiVersion`, `kind`
   * and `metadata.name`), owned by the field manager `wasm-informer/PLUGIN`.
   * Sent with `kube.patch` it may create the object (the grant needs
   * `create` as well as `patch`); `kube.apply` can forbid that (`mustExist`).
   */
  apply: (body) => Object.freeze({ type: 'apply', body }),
};

function text(body) {
  return typeof body === 'string' ? body : JSON.stringify(body);
}

function where(resource, namespace, name) {
  const ns = namespace ? `${namespace}/` : '';
  return `${resource} ${ns}${name ?? ''}`.trimEnd();
}

function patchParts(patch) {
  if (!patch || !PATCH_TYPES.has(patch.type)) {
    throw new TypeError(
      "kube: a patch is Patch.merge(body), Patch.json(ops), Patch.strategicMerge(body) or Patch.apply(body)",
    );
  }
  return [patch.type, text(patch.body)];
}

/**
 * The Kubernetes API, as the plugin's manifest grants it (`[[write]]`). Every
 * call blocks only this plugin and throws `ApiError` on failure. `namespace`
 * is `undefined` (or `null`) for cluster-scoped resources; bodies are objects
 * (sent as JSON) or JSON text. Objects returned are valid for the call.
 */
export const kube = {
  /** A live read from the API server, bypassing the cache (verb `get`). */
  get(resource, namespace, name) {
    const ns = namespace ?? undefined;
    return wrap(apiCall(`get ${where(resource, ns, name)}`, () => witKube.get(resource, ns, name)));
  },
  /** Creates an object (verb `create`). */
  create(resource, namespace, body) {
    const ns = namespace ?? undefined;
    return wrap(
      apiCall(`create ${where(resource, ns)}`, () => witKube.create(resource, ns, text(body))),
    );
  },
  /**
   * Replaces an object (verb `replace`). Its `metadata.resourceVersion` is the
   * precondition: a stale one throws `ApiError` `conflict`.
   */
  replace(resource, namespace, name, body) {
    const ns = namespace ?? undefined;
    return wrap(
      apiCall(`replace ${where(resource, ns, name)}`, () =>
        witKube.replace(resource, ns, name, text(body)),
      ),
    );
  },
  /**
   * Patches an object (verb `patch`) with a `Patch`. `force` applies to
   * `Patch.apply` only: it takes over fields another manager owns.
   */
  patch(resource, namespace, name, patch, { force = false } = {}) {
    const ns = namespace ?? undefined;
    const [type, body] = patchParts(patch);
    return wrap(
      apiCall(`patch ${where(resource, ns, name)}`, () =>
        witKube.patch(resource, ns, name, type, body, Boolean(force)),
      ),
    );
  },
  /**
   * Server-side apply of `intent`, the fully specified object (`apiVersion`,
   * `kind`, `metadata.name` and the fields this plugin owns; an object or
   * JSON text), as field manager `wasm-informer/PLUGIN` (verb `patch`, and
   * `create` too unless `mustExist`). `force` takes over fields another
   * manager owns instead of throwing `conflict`. `mustExist` never creates
   * the object: when the host's cache does not hold it, this throws
   * `ApiError` `not-found` and nothing is sent. Use it for writes made from
   * an event: the object may be gone by the time the event is handled.
   */
  apply(resource, namespace, name, intent, { force = false, mustExist = false } = {}) {
    const ns = namespace ?? undefined;
    const options = { force: Boolean(force), mustExist: Boolean(mustExist) };
    return wrap(
      apiCall(`apply ${where(resource, ns, name)}`, () =>
        witKube.apply(resource, ns, name, text(intent), options),
      ),
    );
  },
  /**
   * Deletes an object (verb `delete`), only if it still has `uid` and is
   * still at `resourceVersion` when those are given; `propagation` is
   * 'orphan', 'background' or 'foreground' (the server's default when
   * omitted). Returns the object while finalizers or foreground deletion
   * hold it, `undefined` when it is gone at once.
   */
  delete(resource, namespace, name, { uid, resourceVersion, propagation } = {}) {
    const ns = namespace ?? undefined;
    if (propagation != null && !PROPAGATIONS.has(propagation)) {
      throw new TypeError(`kube.delete: propagation ${propagation} is not orphan|background|foreground`);
    }
    const options = {
      uid: uid ?? undefined,
      resourceVersion: resourceVersion ?? undefined,
      propagation: propagation ?? undefined,
    };
    return wrap(
      apiCall(`delete ${where(resource, ns, name)}`, () =>
        witKube.delete(resource, ns, name, options),
      ),
    );
  },
  /** Reads the status subresource. */
  getStatus(resource, namespace, name) {
    const ns = namespace ?? undefined;
    return wrap(
      apiCall(`get-status ${where(resource, ns, name)}`, () => witKube.getStatus(resource, ns, name)),
    );
  },
  /** Replaces the status subresource (same precondition as `replace`). */
  replaceStatus(resource, namespace, name, body) {
    const ns = namespace ?? undefined;
    return wrap(
      apiCall(`replace-status ${where(resource, ns, name)}`, () =>
        witKube.replaceStatus(resource, ns, name, text(body)),
      ),
    );
  },
  /** Patches the status subresource with a `Patch`. */
  patchStatus(resource, namespace, name, patch, { force = false } = {}) {
    const ns = namespace ?? undefined;
    const [type, body] = patchParts(patch);
    return wrap(
      apiCall(`patch-status ${where(resource, ns, name)}`, () =>
        witKube.patchStatus(resource, ns, name, type, body, Boolean(force)),
      ),
    );
  },
  /** Whether this plugin's writes are dry runs (`dry_run = true`, or the host's `--dry-run`). */
  dryRun() {
    return witKube.dryRun();
  },
};

// ---- Kubernetes Events ---------------------------------------------------------

function refOf(regarding) {
  return regarding instanceof KubeObject ? regarding.reference : regarding;
}

/**
 * Kubernetes Events (events.k8s.io/v1) about objects, recorded as
 * `reportingController` `wasm-informer/PLUGIN`; needs `events = true` in the
 * manifest. A repeat of the same type, reason and action about the same object
 * within six minutes increments the first Event's `series`. Throws `ApiError`.
 */
export const events = {
  /**
   * Records `{regarding, type: 'normal'|'warning', reason, action, note}`;
   * `regarding` is a `KubeObject` or an object reference.
   */
  publish({ regarding, type, reason, action, note = '' }) {
    if (type !== 'normal' && type !== 'warning') {
      throw new TypeError(`events.publish: type ${type} is not normal|warning`);
    }
    const ref = refOf(regarding);
    const event = {
      regarding: ref,
      type,
      reason: String(reason),
      action: String(action),
      note: String(note),
    };
    const about = `${ref.kind} ${ref.namespace ? `${ref.namespace}/` : ''}${ref.name}`;
    apiCall(`event ${reason} about ${about}`, () => witPublish(event));
  },
  /** Records a `Normal` Event about `regarding`. */
  normal(regarding, reason, action, note = '') {
    events.publish({ regarding, type: 'normal', reason, action, note });
  },
  /** Records a `Warning` Event about `regarding`. */
  warning(regarding, reason, action, note = '') {
    events.publish({ regarding, type: 'warning', reason, action, note });
  },
};

// ---- the event-handler world ---------------------------------------------------

function errorMessage(e) {
  if (e instanceof Error) return e.message;
  return String(e);
}

function parseConfig(configJson) {
  try {
    return JSON.parse(configJson);
  } catch (e) {
    throw new Error(`config is not valid JSON: ${e.message}`);
  }
}

const KIND_METHODS = { added: 'onAdd', updated: 'onUpdate', deleted: 'onDelete', synced: 'onSync' };

/**
 * Turns a plugin object into the exported `handler` interface:
 * `export const handler = definePlugin({ init?(config), onAdd?(event),
 * onUpdate?(event), onDelete?(event), onSync?(event), onEvent?(event) })`.
 * Each event goes to the method for its kind, or to `onEvent` when the plugin
 * has none for that kind. `init` receives the manifest's `[config]` table
 * already parsed. Any exception becomes the `err` result with its message.
 */
export function definePlugin(plugin) {
  const any = typeof plugin?.onEvent === 'function' ? plugin.onEvent : undefined;
  const methods = {};
  let handles = Boolean(any);
  for (const [kind, name] of Object.entries(KIND_METHODS)) {
    const m = plugin?.[name];
    if (m !== undefined && typeof m !== 'function') {
      throw new TypeError(`definePlugin: ${name} must be a function`);
    }
    methods[kind] = m ?? any;
    handles ||= Boolean(m);
  }
  if (!handles) {
    throw new TypeError('definePlugin: the plugin needs onAdd, onUpdate, onDelete, onSync or onEvent');
  }
  return {
    init(configJson) {
      try {
        const config = parseConfig(configJson);
        if (typeof plugin.init === 'function') plugin.init.call(plugin, config);
      } catch (e) {
        throw errorMessage(e);
      } finally {
        endCall();
      }
    },
    onEvent(info) {
      const m = methods[info.kind];
      if (m === undefined) return;
      try {
        m.call(plugin, new Event(info));
      } catch (e) {
        throw errorMessage(e);
      } finally {
        endCall();
      }
    },
  };
}

// ---- the controller world ----------------------------------------------------------

/** What to do after a successful reconcile. */
export const Action = {
  /** Nothing until the next change. */
  done: () => DONE,
  /** Reconcile again after `ms` milliseconds, change or not. */
  requeueAfter(ms) {
    if (!Number.isFinite(ms) || ms < 0) throw new TypeError('Action.requeueAfter(ms): ms must be >= 0');
    return Object.freeze({ tag: 'requeue-after', val: BigInt(Math.ceil(ms)) });
  },
};
const DONE = Object.freeze({ tag: 'done' });

/**
 * A failed reconcile. `retry` (the default for any exception) requeues the key
 * with the work queue's backoff; `terminal` does not retry until the next change.
 */
export class ReconcileError extends Error {
  constructor(message, { terminal = false } = {}) {
    super(message);
    this.name = 'ReconcileError';
    this.terminal = terminal;
  }
  /** An error worth retrying. */
  static retry(message) {
    return new ReconcileError(message);
  }
  /** An error not worth retrying (a spec that can never be satisfied). */
  static terminal(message) {
    return new ReconcileError(message, { terminal: true });
  }
}

/** The key to reconcile: `resource`, `namespace` (or `undefined`), `name`, `key`. */
export class Request {
  constructor(r) {
    this.resource = r.resource;
    this.namespace = r.namespace;
    this.name = r.name;
    this.key = r.key;
  }
  /** The object's current state in the cache, or `undefined` when it is gone. */
  object() {
    return cache.get(this.resource, this.key);
  }
}

function actionOf(result) {
  if (result === undefined || result === null) return DONE;
  if (result === DONE || (result && result.tag === 'requeue-after' && typeof result.val === 'bigint')) {
    return result;
  }
  throw new TypeError('reconcile must return Action.done(), Action.requeueAfter(ms) or nothing');
}

/**
 * Turns a controller object into the exported `reconciler` interface:
 * `export const reconciler = defineController({ init?(config), reconcile(request) })`.
 * `reconcile` returns `Action.done()` (or nothing) or `Action.requeueAfter(ms)`;
 * a thrown `ReconcileError.terminal(msg)` is not retried, any other exception
 * is retried with backoff.
 */
export function defineController(controller) {
  if (typeof controller?.reconcile !== 'function') {
    throw new TypeError('defineController: the controller must have a reconcile(request) function');
  }
  return {
    init(configJson) {
      try {
        const config = parseConfig(configJson);
        if (typeof controller.init === 'function') controller.init.call(controller, config);
      } catch (e) {
        throw errorMessage(e);
      } finally {
        endCall();
      }
    },
    reconcile(request) {
      try {
        return actionOf(controller.reconcile.call(controller, new Request(request)));
      } catch (e) {
        const terminal = e instanceof ReconcileError && e.terminal;
        throw { tag: terminal ? 'terminal' : 'retry', val: errorMessage(e) };
      } finally {
        endCall();
      }
    },
  };
}

/**
 * Runs a reconcile under the finalizer `name` (for example
 * `example.com/cleanup`), as kube-runtime's `finalizer` does:
 * - the object is gone: nothing to do (the finalizer made sure cleanup ran);
 * - no finalizer yet and not being deleted: adds it and returns; the change
 *   queues the key again;
 * - being deleted with the finalizer: `cleanup(object)`; when it returns done
 *   (`Action.done()` or nothing), removes the finalizer so the deletion
 *   completes; when it returns `Action.requeueAfter(ms)` (cleanup still under
 *   way) or throws, keeps the finalizer (and returns the requeue, or throws);
 * - being deleted without the finalizer: nothing to do;
 * - otherwise: `apply(object)`.
 * Returns what `apply`/`cleanup` return (an Action, or nothing for done).
 *
 * Both patches are JSON patches that test `/metadata/uid`, so they never touch
 * another object re-created under the same name; the add also tests the
 * resourceVersion (a stale view gets a conflict), the removal tests the
 * finalizer's position.
 *
 * Under dry run (`kube.dryRun()`) no patch persists, so the helper does in one
 * reconcile what a live run spreads over several, and a dry run shows the
 * writes a live run would make: after the (dry-run) add it calls `apply` at
 * once; an object being deleted without the finalizer gets `cleanup`, as it
 * would have had the finalizer in a live run, and no removal (there is nothing
 * to remove). A cleanup with effects outside the cluster checks `kube.dryRun()`
 * itself. An object deleted while no other finalizer held it is gone at once,
 * so a dry run cannot show its cleanup.
 *
 * Needs `patch` on the resource in the manifest's `[[write]]` grants.
 */
export function finalizer(request, name, { apply, cleanup }) {
  const object = request.object();
  if (object === undefined) return Action.done();
  const meta = object.meta;
  const at = meta.finalizers.indexOf(name);
  const deleting = meta.deletionTimestamp !== undefined;
  const uid = { op: 'test', path: '/metadata/uid', value: meta.uid };
  if (!deleting && at < 0) {
    const add = meta.finalizers.length
      ? { op: 'add', path: '/metadata/finalizers/-', value: name }
      : { op: 'add', path: '/metadata/finalizers', value: [name] };
    kube.patch(
      request.resource,
      request.namespace,
      request.name,
      Patch.json([uid, { op: 'test', path: '/metadata/resourceVersion', value: meta.resourceVersion }, add]),
    );
    // A dry-run add does not persist: no change queues the key again.
    if (kube.dryRun()) return apply(object);
    return Action.done();
  }
  if (!deleting) return apply(object);
  if (at < 0) {
    // Under dry run the finalizer was never added: a live run would clean up now.
    return kube.dryRun() ? cleanup(object) : Action.done();
  }
  const action = actionOf(cleanup(object));
  // Cleanup still under way: the finalizer holds the delete.
  if (action.tag !== 'done') return action;
  try {
    kube.patch(
      request.resource,
      request.namespace,
      request.name,
      Patch.json([
        uid,
        { op: 'test', path: `/metadata/finalizers/${at}`, value: name },
        { op: 'remove', path: `/metadata/finalizers/${at}` },
      ]),
    );
  } catch (e) {
    if (!isNotFound(e)) throw e;
  }
  return action;
}
