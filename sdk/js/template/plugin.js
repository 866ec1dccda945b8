// Template wasm-informer plugin in JavaScript: logs one line per event and the
// number of cached objects in the event's namespace.
//
// Build:  scripts/build-plugins.sh   (or: node sdk/js/build.mjs sdk/js/template/plugin.js out.wasm)
import { definePlugin, cache, info, keyOf } from '../src/informer.js';

let prefix = 'event';

export const handler = definePlugin({
  // `config` is the manifest's [config] table, already parsed.
  init(config) {
    if (config.prefix !== undefined) {
      if (typeof config.prefix !== 'string') throw new Error('config.prefix must be a string');
      prefix = config.prefix;
    }
  },
  onEvent(event) {
    const ns = event.object.meta.namespace;
    const peers = ns ? cache.list(event.resource, { namespace: ns }).length : 0;
    info(`${prefix} kind=${event.kind} resource=${event.resource} key=${keyOf(event.object)} namespace-objects=${peers}`);
  },
});
