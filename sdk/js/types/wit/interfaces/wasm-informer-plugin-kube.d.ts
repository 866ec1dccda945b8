/// <reference path="./wasm-informer-plugin-types.d.ts" />
declare module 'wasm-informer:plugin/kube@0.2.1' {
  /**
   * A live read from the API server, bypassing the cache (verb `get`).
   */
  export function get(resource: string, namespace: string | undefined, name: string): ObjectRef;
  /**
   * Creates the object (verb `create`).
   */
  export function create(resource: string, namespace: string | undefined, body: string): ObjectRef;
  /**
   * Replaces the object (verb `replace`). The body's
   * `metadata.resourceVersion` is the precondition: if the object changed
   * since, the result is `conflict`. A body without one is `invalid`.
   */
  export function replace(resource: string, namespace: string | undefined, name: string, body: string): ObjectRef;
  /**
   * Patches the object (verb `patch`). `force` applies only to `apply`: it
   * takes over fields another manager owns instead of failing with
   * `conflict`.
   */
  export function patch(resource: string, namespace: string | undefined, name: string, kind: PatchType, body: string, force: boolean): ObjectRef;
  /**
   * Server-side apply of `body`, the fully specified intent, owned by the
   * field manager `wasm-informer/PLUGIN` (verb `patch`, and `create` too
   * unless `must-exist`). Since 0.2.1.
   */
  export function apply(resource: string, namespace: string | undefined, name: string, body: string, options: ApplyOptions): ObjectRef;
  /**
   * Deletes the object (verb `delete`). The server answers with the object
   * while finalizers or foreground deletion hold it, and with none when it
   * is gone at once.
   */
  export { _delete as delete };
  function _delete(resource: string, namespace: string | undefined, name: string, options: DeleteOptions): ObjectRef | undefined;
  /**
   * Reads the status subresource (a grant with `subresource = "status"`).
   */
  export function getStatus(resource: string, namespace: string | undefined, name: string): ObjectRef;
  /**
   * Replaces the status subresource, with the same precondition as
   * `replace`.
   */
  export function replaceStatus(resource: string, namespace: string | undefined, name: string, body: string): ObjectRef;
  /**
   * Patches the status subresource.
   */
  export function patchStatus(resource: string, namespace: string | undefined, name: string, kind: PatchType, body: string, force: boolean): ObjectRef;
  /**
   * Whether this plugin's writes are dry runs.
   */
  export function dryRun(): boolean;
  export type ObjectRef = import('wasm-informer:plugin/types@0.2.1').ObjectRef;
  export type ApiError = import('wasm-informer:plugin/types@0.2.1').ApiError;
  /**
   * The form of a patch.
   * # Variants
   * 
   * ## `"merge"`
   * 
   * RFC 7386 JSON merge patch.
   * ## `"json"`
   * 
   * RFC 6902 JSON patch.
   * ## `"strategic-merge"`
   * 
   * Kubernetes strategic merge patch.
   * ## `"apply"`
   * 
   * Server-side apply: the body is the fully specified intent, owned by
   * the field manager `wasm-informer/PLUGIN`.
   */
  export type PatchType = 'merge' | 'json' | 'strategic-merge' | 'apply';
  /**
   * What happens to a deleted object's dependents.
   * # Variants
   * 
   * ## `"orphan"`
   * 
   * Dependents are kept; their owner reference is removed.
   * ## `"background"`
   * 
   * The object goes at once; the garbage collector deletes dependents.
   * ## `"foreground"`
   * 
   * Dependents go first, then the object.
   */
  export type Propagation = 'orphan' | 'background' | 'foreground';
  /**
   * Options of `apply`.
   */
  export interface ApplyOptions {
    /**
     * Take over fields another manager owns instead of failing with
     * `conflict`.
     */
    force: boolean,
    /**
     * Never create the object: when the host's cache does not hold it,
     * the answer is `not-found` and nothing is sent. An apply that may
     * create needs `create` in the grant as well as `patch`; one that
     * must exist needs `patch` only. Use it for writes made from an
     * event, which may be stale: the object may be gone by now.
     */
    mustExist: boolean,
  }
  /**
   * Options of a delete.
   */
  export interface DeleteOptions {
    /**
     * Delete only if the object still has this uid.
     */
    uid?: string,
    /**
     * Delete only if the object is still at this resourceVersion.
     */
    resourceVersion?: string,
    /**
     * The server's default when none.
     */
    propagation?: Propagation,
  }
}
