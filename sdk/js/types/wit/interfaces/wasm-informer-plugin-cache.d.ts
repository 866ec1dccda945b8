/// <reference path="./wasm-informer-plugin-types.d.ts" />
declare module 'wasm-informer:plugin/cache@0.2.1' {
  /**
   * One object by resource id and key (`namespace/name` or `name`).
   */
  export function get(resource: string, key: string): ObjectRef | undefined;
  /**
   * Objects of a resource, optionally in one namespace and matching a label
   * selector in full Kubernetes syntax (`a=b`, `a!=b`, `a in (x,y)`,
   * `a notin (x)`, `a`, `!a`, comma-separated).
   */
  export function list(resource: string, namespace: string | undefined, labelSelector: string | undefined): Uint32Array;
  /**
   * Objects whose value for the named index equals `value`. The index
   * `namespace` always exists; others are defined in the host's configuration.
   */
  export function byIndex(resource: string, indexName: string, value: string): Uint32Array;
  /**
   * Whether the informer for the resource has finished its first list.
   */
  export function hasSynced(resource: string): boolean;
  export type ObjectRef = import('wasm-informer:plugin/types@0.2.1').ObjectRef;
  export type CacheError = import('wasm-informer:plugin/types@0.2.1').CacheError;
}
