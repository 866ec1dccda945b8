/// <reference path="./interfaces/wasm-informer-plugin-cache.d.ts" />
/// <reference path="./interfaces/wasm-informer-plugin-handler.d.ts" />
/// <reference path="./interfaces/wasm-informer-plugin-log.d.ts" />
/// <reference path="./interfaces/wasm-informer-plugin-types.d.ts" />
declare module 'wasm-informer:plugin/event-handler@0.1.0' {
  export type * as WasmInformerPluginCache010 from 'wasm-informer:plugin/cache@0.1.0'; // import wasm-informer:plugin/cache@0.1.0
  export type * as WasmInformerPluginLog010 from 'wasm-informer:plugin/log@0.1.0'; // import wasm-informer:plugin/log@0.1.0
  export type * as WasmInformerPluginTypes010 from 'wasm-informer:plugin/types@0.1.0'; // import wasm-informer:plugin/types@0.1.0
  export * as handler from 'wasm-informer:plugin/handler@0.1.0'; // export wasm-informer:plugin/handler@0.1.0
}
