/// <reference path="./wasm-informer-plugin-types.d.ts" />
declare module 'wasm-informer:plugin/events@0.2.1' {
  /**
   * Records an Event.
   */
  export function publish(event: Event): void;
  export type ObjectReference = import('wasm-informer:plugin/types@0.2.1').ObjectReference;
  export type ApiError = import('wasm-informer:plugin/types@0.2.1').ApiError;
  /**
   * # Variants
   * 
   * ## `"normal"`
   * 
   * Something expected happened.
   * ## `"warning"`
   * 
   * Something a human may need to look at.
   */
  export type EventType = 'normal' | 'warning';
  /**
   * One Event.
   */
  export interface Event {
    /**
     * The object the Event is about (`objects.reference` gives it for an
     * object the plugin holds).
     */
    regarding: ObjectReference,
    type: EventType,
    /**
     * Why, in UpperCamelCase, for example `MissingLabel`.
     */
    reason: string,
    /**
     * What was done or failed, for example `Labelled`.
     */
    action: string,
    /**
     * For a human; the server keeps at most 1 kB.
     */
    note: string,
  }
}
