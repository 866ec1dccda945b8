declare module 'wasm-informer:plugin/reconciler@0.2.1' {
  /**
   * As `handler.init`.
   */
  export function init(config: string): void;
  /**
   * Makes the world match the object's desired state. Never called for one
   * key twice at once.
   */
  export function reconcile(request: Request): Action;
  /**
   * The object to reconcile. Its current state is in the cache (it may be
   * gone: then clean up).
   */
  export interface Request {
    /**
     * The primary resource, for example `apps/v1/deployments`.
     */
    resource: string,
    /**
     * None for cluster-scoped objects.
     */
    namespace?: string,
    name: string,
    /**
     * The cache key: `namespace/name`, or `name`.
     */
    key: string,
  }
  /**
   * What to do after a successful reconcile.
   */
  export type Action = ActionDone | ActionRequeueAfter;
  /**
   * Nothing until the next change.
   */
  export interface ActionDone {
    tag: 'done',
  }
  /**
   * Reconcile again after this many milliseconds, change or not.
   */
  export interface ActionRequeueAfter {
    tag: 'requeue-after',
    val: bigint,
  }
  /**
   * Why a reconcile failed.
   */
  export type ReconcileError = ReconcileErrorRetry | ReconcileErrorTerminal;
  /**
   * Try again later, with the queue's rate-limited backoff.
   */
  export interface ReconcileErrorRetry {
    tag: 'retry',
    val: string,
  }
  /**
   * Do not retry: counted and logged; the next change queues it again.
   */
  export interface ReconcileErrorTerminal {
    tag: 'terminal',
    val: string,
  }
}
