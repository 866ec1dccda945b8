declare module 'wasm-informer:plugin/types@0.2.1' {
  /**
   * What happened to an object.
   * # Variants
   * 
   * ## `"added"`
   * 
   * The object appeared: created, first seen in a list, part of a
   * replay, or moved into the plugin's namespace or selector.
   * ## `"updated"`
   * 
   * The object changed. The event carries the previous state when the
   * host still had it.
   * ## `"deleted"`
   * 
   * The object is gone. The event's object is its last known state.
   * ## `"synced"`
   * 
   * A periodic resync re-delivers the cached state; nothing changed on
   * the server. Level-triggered handlers treat it like `updated`.
   */
  export type EventKind = 'added' | 'updated' | 'deleted' | 'synced';
  /**
   * Names one object the host holds, for the duration of the current call
   * into the plugin only (`init`, `on-event` or `reconcile`). The host
   * forgets every reference when that call returns: a plugin copies out
   * what it wants to keep. Passing a forgotten or made-up reference to
   * `objects` traps the instance. References are always below 2^31.
   */
  export type ObjectRef = number;
  /**
   * One notification for one object. Every field is a scalar, so
   * delivering it allocates nothing in the plugin.
   */
  export interface EventInfo {
    kind: EventKind,
    /**
     * The new state; for `deleted`, the last known state.
     */
    object: ObjectRef,
    /**
     * The previous state, for `updated` when the host still had it. It
     * costs nothing unless read.
     */
    oldObject?: ObjectRef,
    /**
     * True while the host replays its cache into a newly loaded,
     * reloaded or restarted plugin, before live events start.
     */
    isInInitialList: boolean,
    /**
     * True on a `deleted` event the host synthesised because the real
     * delete was missed (a relist found the object gone, or the plugin's
     * queue overflowed). The object is then the last state the host knew.
     */
    finalStateUnknown: boolean,
  }
  /**
   * Names an object by its API coordinates, for example the one an Event
   * is about (an `ObjectReference`).
   */
  export interface ObjectReference {
    /**
     * `v1`, `apps/v1`, ...
     */
    apiVersion: string,
    /**
     * `Pod`, `Deployment`, ...
     */
    kind: string,
    /**
     * None for cluster-scoped objects.
     */
    namespace?: string,
    name: string,
    uid?: string,
  }
  /**
   * One entry of `metadata.ownerReferences`.
   */
  export interface OwnerReference {
    apiVersion: string,
    kind: string,
    name: string,
    uid: string,
    /**
     * The owner is the object's managing controller.
     */
    controller: boolean,
  }
  /**
   * Everything the host has parsed of `metadata`, in one call.
   */
  export interface ObjectMeta {
    /**
     * None for cluster-scoped objects.
     */
    namespace?: string,
    name: string,
    uid: string,
    resourceVersion: string,
    /**
     * `metadata.generation`, when the object has one.
     */
    generation?: bigint,
    labels: Array<[string, string]>,
    annotations: Array<[string, string]>,
    /**
     * RFC 3339, as the API server wrote it.
     */
    creationTimestamp?: string,
    /**
     * Set while finalizers hold a deleted object.
     */
    deletionTimestamp?: string,
    finalizers: Array<string>,
    ownerReferences: Array<OwnerReference>,
  }
  /**
   * Why a cache query failed. Queries never trap the plugin.
   */
  export type CacheError = CacheErrorForbidden | CacheErrorUnknownResource | CacheErrorInvalidSelector | CacheErrorUnknownIndex | CacheErrorTooManyObjects;
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
  /**
   * The answer would hold more objects than one call may reference
   * (the number is the limit); narrow the query (a namespace, a
   * selector or an index).
   */
  export interface CacheErrorTooManyObjects {
    tag: 'too-many-objects',
    val: number,
  }
  /**
   * One cause of an `invalid` answer (the Status's `details.causes`).
   */
  export interface Cause {
    /**
     * The field at fault, for example `spec.containers[0].image`.
     */
    field: string,
    /**
     * Machine-readable, for example `FieldValueRequired`.
     */
    reason: string,
    message: string,
  }
  /**
   * The server refused an object or a patch.
   */
  export interface InvalidDetails {
    message: string,
    causes: Array<Cause>,
  }
  /**
   * Why an API call failed. Calls never trap the plugin.
   */
  export type ApiError = ApiErrorForbidden | ApiErrorNotFound | ApiErrorConflict | ApiErrorAlreadyExists | ApiErrorInvalid | ApiErrorRateLimited | ApiErrorTimeout | ApiErrorUnavailable;
  /**
   * The manifest does not grant this call (nothing was sent), or the
   * API server's RBAC refused it.
   */
  export interface ApiErrorForbidden {
    tag: 'forbidden',
    val: string,
  }
  /**
   * No such object.
   */
  export interface ApiErrorNotFound {
    tag: 'not-found',
    val: string,
  }
  /**
   * A precondition (resourceVersion, uid) failed, or a server-side
   * apply conflicts with another field manager.
   */
  export interface ApiErrorConflict {
    tag: 'conflict',
    val: string,
  }
  /**
   * A create of an object that already exists.
   */
  export interface ApiErrorAlreadyExists {
    tag: 'already-exists',
    val: string,
  }
  /**
   * The server refused the object or the patch.
   */
  export interface ApiErrorInvalid {
    tag: 'invalid',
    val: InvalidDetails,
  }
  /**
   * The plugin's write rate limit, or the server's (429 after the
   * host's retries).
   */
  export interface ApiErrorRateLimited {
    tag: 'rate-limited',
    val: string,
  }
  /**
   * No answer within the call's time (`write_timeout_ms`, or what was
   * left of the event's `api_time_per_event_ms`).
   */
  export interface ApiErrorTimeout {
    tag: 'timeout',
    val: string,
  }
  /**
   * The server failed (5xx) or could not be reached.
   */
  export interface ApiErrorUnavailable {
    tag: 'unavailable',
    val: string,
  }
}
