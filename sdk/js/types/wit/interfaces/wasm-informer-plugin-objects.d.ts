/// <reference path="./wasm-informer-plugin-types.d.ts" />
declare module 'wasm-informer:plugin/objects@0.2.1' {
  /**
   * The resource id, for example `v1/pods` or `apps/v1/deployments`.
   */
  export function resource(obj: ObjectRef): string;
  /**
   * The cache key: `namespace/name`, or `name` for cluster-scoped objects.
   */
  export function key(obj: ObjectRef): string;
  /**
   * None for cluster-scoped objects.
   */
  export function namespace(obj: ObjectRef): string | undefined;
  export function name(obj: ObjectRef): string;
  export function uid(obj: ObjectRef): string;
  export function resourceVersion(obj: ObjectRef): string;
  /**
   * `metadata.generation`, when the object has one.
   */
  export function generation(obj: ObjectRef): bigint | undefined;
  /**
   * The value of one label.
   */
  export function label(obj: ObjectRef, key: string): string | undefined;
  /**
   * Every label, sorted by key.
   */
  export function labels(obj: ObjectRef): Array<[string, string]>;
  /**
   * The value of one annotation.
   */
  export function annotation(obj: ObjectRef, key: string): string | undefined;
  /**
   * Every annotation, sorted by key.
   */
  export function annotations(obj: ObjectRef): Array<[string, string]>;
  /**
   * Everything parsed of `metadata`, in one call.
   */
  export function meta(obj: ObjectRef): ObjectMeta;
  /**
   * This object as an Event's `regarding`.
   */
  export function reference(obj: ObjectRef): ObjectReference;
  /**
   * The whole object as compact JSON. For a cached object this is after
   * the host's transform (by default `metadata.managedFields` is
   * stripped); an object the API server answered with is as it answered.
   */
  export function json(obj: ObjectRef): string;
  export type ObjectRef = import('wasm-informer:plugin/types@0.2.1').ObjectRef;
  export type ObjectMeta = import('wasm-informer:plugin/types@0.2.1').ObjectMeta;
  export type ObjectReference = import('wasm-informer:plugin/types@0.2.1').ObjectReference;
}
