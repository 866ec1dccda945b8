// wasm-informer plugin SDK for JavaScript: event helpers, typed cache wrappers and
// leveled logging over the `wasm-informer:plugin@0.1.0` WIT imports.
//
// Invariant: nothing here throws into the host except through `definePlugin`,
// which turns every exception into the `err` result of `init` / `on-event`
// (a handler error, never a trap).
//
// The plugin source imports this file by relative path; componentize-js bundles
// it into the component (see sdk/js/build.mjs).
import * as wit_cache from 'wasm-informer:plugin/cache@0.1.0';
import { log as wit_log } from 'wasm-informer:plugin/log@0.1.0';

/** Writes one message to the host log at `level` ('trace'..'error'). */
export function log(level, message) {
  wit_log(level, String(message));
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

/**
 * A failed cache query. `kind` is the WIT `cache-error` case: 'forbidden',
 * 'unknown-resource', 'invalid-selector' or 'unknown-index'.
 */
export class CacheError extends Error {
  constructor(kind, detail, query) {
    super(`cache ${query}: ${kind}: ${detail}`);
    this.name = 'CacheError';
    this.kind = kind;
    this.detail = detail;
  }
}

function cacheCall(query, fn) {
  try {
    return fn();
  } catch (e) {
    // jco maps an `err` result of an import to a thrown error whose payload is
    // the WIT variant `{ tag, val }`.
    const p = e && e.payload;
    if (p && typeof p.tag === 'string') {
      throw new CacheError(p.tag, p.val, query);
    }
    throw e;
  }
}

/** Typed, throwing wrappers over the `cache` import. */
export const cache = {
  /**
   * One object by resource id and key, or `undefined` when it is not cached.
   * Throws `CacheError`.
   */
  get(resource, key) {
    return cacheCall(`get ${resource} ${key}`, () => wit_cache.get(resource, key));
  },
  /**
   * Objects of `resource`, optionally filtered by `namespace` and a Kubernetes
   * label selector string. Throws `CacheError`.
   */
  list(resource, { namespace, labelSelector } = {}) {
    return cacheCall(`list ${resource}`, () =>
      wit_cache.list(resource, namespace ?? undefined, labelSelector ?? undefined),
    );
  },
  /** Objects whose value of index `indexName` equals `value`. Throws `CacheError`. */
  byIndex(resource, indexName, value) {
    return cacheCall(`by-index ${resource} ${indexName}`, () =>
      wit_cache.byIndex(resource, indexName, value),
    );
  },
  /** Whether the informer for `resource` finished its first list. Throws `CacheError`. */
  hasSynced(resource) {
    return cacheCall(`has-synced ${resource}`, () => wit_cache.hasSynced(resource));
  },
};

/** Labels of an object view (or its meta) as a plain object. */
export function labels(view) {
  return kvToObject((view.meta ?? view).labels);
}

/** Annotations of an object view (or its meta) as a plain object. */
export function annotations(view) {
  return kvToObject((view.meta ?? view).annotations);
}

function kvToObject(list) {
  const out = {};
  for (const { key, value } of list) out[key] = value;
  return out;
}

/** The parsed JSON body of an object view. */
export function body(view) {
  return JSON.parse(view.json);
}

/** `namespace/name`, or `name` for cluster-scoped objects. */
export function keyOf(view) {
  const m = view.meta ?? view;
  return m.namespace ? `${m.namespace}/${m.name}` : m.name;
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
 * True when the cache already holds a newer version of the event's object than
 * the event itself, i.e. a later event for the same key is queued. Level-based
 * handlers may skip such events. Deletes are never stale.
 */
export function isStale(event) {
  if (event.kind === 'deleted') return false;
  const current = cache.get(event.resource, event.key);
  return current !== undefined && current.meta.resourceVersion !== event.object.meta.resourceVersion;
}

/**
 * Turns a plugin object `{ init?(config), onEvent(event) }` into the exported
 * `handler` interface. `init` receives the manifest's `[config]` table already
 * parsed from JSON. Any exception becomes the `err` result with its message.
 */
export function definePlugin(plugin) {
  if (typeof plugin?.onEvent !== 'function') {
    throw new TypeError('definePlugin: the plugin must have an onEvent(event) function');
  }
  return {
    init(configJson) {
      let config;
      try {
        config = JSON.parse(configJson);
      } catch (e) {
        throw `config is not valid JSON: ${e.message}`;
      }
      try {
        if (typeof plugin.init === 'function') plugin.init(config);
      } catch (e) {
        throw errorMessage(e);
      }
    },
    onEvent(event) {
      try {
        plugin.onEvent(event);
      } catch (e) {
        throw errorMessage(e);
      }
    },
  };
}

function errorMessage(e) {
  if (e instanceof Error) return e.message;
  return String(e);
}
