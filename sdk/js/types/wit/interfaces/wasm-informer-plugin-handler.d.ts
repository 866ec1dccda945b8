/// <reference path="./wasm-informer-plugin-types.d.ts" />
declare module 'wasm-informer:plugin/handler@0.2.1' {
  /**
   * Called once per instance, before any event, with the manifest's
   * `[config]` table as JSON (`{}` when there is none). An error stops the
   * plugin from loading and is reported with the message.
   */
  export function init(config: string): void;
  /**
   * Called once per event. An error is counted as a handler error and the
   * plugin carries on with the next event; a trap replaces the instance.
   */
  export function onEvent(event: EventInfo): void;
  export type EventInfo = import('wasm-informer:plugin/types@0.2.1').EventInfo;
}
