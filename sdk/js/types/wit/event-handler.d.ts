/// <reference path="./interfaces/wasm-informer-plugin-cache.d.ts" />
/// <reference path="./interfaces/wasm-informer-plugin-events.d.ts" />
/// <reference path="./interfaces/wasm-informer-plugin-handler.d.ts" />
/// <reference path="./interfaces/wasm-informer-plugin-kube.d.ts" />
/// <reference path="./interfaces/wasm-informer-plugin-log.d.ts" />
/// <reference path="./interfaces/wasm-informer-plugin-objects.d.ts" />
/// <reference path="./interfaces/wasm-informer-plugin-types.d.ts" />
declare module 'wasm-informer:plugin/event-handler@0.2.1' {
  export type * as WasmInformerPluginCache021 from 'wasm-informer:plugin/cache@0.2.1'; // import wasm-informer:plugin/cache@0.2.1
  export type * as WasmInformerPluginEvents021 from 'wasm-informer:plugin/events@0.2.1'; // import wasm-informer:plugin/events@0.2.1
  export type * as WasmInformerPluginKube021 from 'wasm-informer:plugin/kube@0.2.1'; // import wasm-informer:plugin/kube@0.2.1
  export type * as WasmInformerPluginLog021 from 'wasm-informer:plugin/log@0.2.1'; // import wasm-informer:plugin/log@0.2.1
  export type * as WasmInformerPluginObjects021 from 'wasm-informer:plugin/objects@0.2.1'; // import wasm-informer:plugin/objects@0.2.1
  export type * as WasmInformerPluginTypes021 from 'wasm-informer:plugin/types@0.2.1'; // import wasm-informer:plugin/types@0.2.1
  export * as handler from 'wasm-informer:plugin/handler@0.2.1'; // export wasm-informer:plugin/handler@0.2.1
}
