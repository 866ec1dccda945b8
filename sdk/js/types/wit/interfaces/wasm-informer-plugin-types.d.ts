declare module 'wasm-informer:plugin/types@0.1.0' {
  /**
   * What happened to an object.
   * # Variants
   * 
   * ## `"added"`
   * 
   * The object appeared: created, first seen in a list, or moved into the
   * plugin's selector.
   * ## `"updated"`
   * 
   * The object changed. `old-object` holds the previous state when the host
   * still had it.
   * ## `"deleted"`
   * 
   * The object is gone. `object` holds its last known state.
   * ## `"synced"`
   * 
   * A periodic resync re-delivers the cached state; nothing changed on the
   * server. Level-triggered handlers treat it like `updated`.
   */
  export type EventKind = 'added' | 'updated' | 'deleted' | 'synced';
  /**
   * One label or annotation.
   */
  export interface KeyValue {
    key: string,
    value: string,
  }
  /**
   * The metadata the host has already parsed, so a plugin need not parse JSON
   * for the common cases.
   */
  export interface ObjectMeta {
    /**
     * Namespace, or none for cluster-scoped objects.
     */
    namespace?: string,
    name: string,
    uid: string,
    resourceVersion: string,
    /**
     * `metadata.generation`, when the object has one.
     */
    generation?: bigint,
    labels: Array<KeyValue>,
    annotations: Array<KeyValue>,
    /**
     * RFC 3339, as the API server wrote it.
     */
    creationTimestamp?: string,
    /**
     * Set while finalizers hold a deleted object.
     */
    deletionTimestamp?: string,
    /**
     * The `uid` of each owner reference.
     */
    ownerUids: Array<string>,
  }
  /**
   * A Kubernetes object as cached by the host.
   */
  export interface ObjectView {
    meta: ObjectMeta,
    /**
     * The whole object as compact JSON, after the host's transform (by default
     * `metadata.managedFields` is stripped).
     */
    json: string,
  }
  /**
   * One notification for one object.
   */
  export interface Event {
    kind: EventKind,
    /**
     * The resource id, for example `v1/pods` or `apps/v1/deployments`.
     */
    resource: string,
    /**
     * The cache key: `namespace/name`, or `name` for cluster-scoped objects.
     */
    key: string,
    /**
     * The new state; for `deleted`, the last known state.
     */
    object: ObjectView,
    /**
     * The previous state, for `updated` when the host had it.
     */
    oldObject?: ObjectView,
    /**
     * True while the host replays its cache into a newly loaded, reloaded or
     * restarted plugin, before live events start.
     */
    isInInitialList: boolean,
    /**
     * True on a `deleted` event the host synthesised because the real delete was
     * missed (a relist found the object gone, or the plugin's queue overflowed).
     * `object` is then the last state the host knew, which may be stale.
     */
    finalStateUnknown: boolean,
  }
  /**
   * Why a cache query failed. Queries never trap the plugin.
   */
  export type CacheError = CacheErrorForbidden | CacheErrorUnknownResource | CacheErrorInvalidSelector | CacheErrorUnknownIndex;
  /**
   * The manifest's `read` list does not include this resource.
   */
  export interface CacheErrorForbidden {
    tag: 'forbidden',
    val: string,
  }
  /**
   * The host does not watch this resource.
   */
  export interface CacheErrorUnknownResource {
    tag: 'unknown-resource',
    val: string,
  }
  /**
   * The label selector does not parse; the message says where.
   */
  export interface CacheErrorInvalidSelector {
    tag: 'invalid-selector',
    val: string,
  }
  /**
   * No index of that name is defined for the resource.
   */
  export interface CacheErrorUnknownIndex {
    tag: 'unknown-index',
    val: string,
  }
}
