// Template wasm-informer plugin in JavaScript: logs one line per event and the
// number of cached objects in the event's namespace.
//
// Build:  scripts/build-plugins.sh   (or: node sdk/js/build.mjs sdk/js/template/plugin.js out.wasm)
import { definePlugin, cache, info } from '../src/informer.js';

let prefix = 'event';

function report(event) {
  const o = event.object; // a KubeObject: each getter reads one field from the host
  const ns = o.namespace;
  const peers = ns ? cache.list(o.resource, { namespace: ns }).length : 0;
  info(`${prefix} kind=${event.kind} resource=${o.resource} key=${o.key} namespace-objects=${peers}`);
}

export const handler = definePlugin({
  // `config` is the manifest's [config] table, already parsed.
  init(config) {
    if (config.prefix !== undefined) {
      if (typeof config.prefix !== 'string') throw new Error('config.prefix must be a string');
      prefix = config.prefix;
    }
  },
  // One method per event kind (onAdd, onUpdate, onDelete, onSync), or onEvent for all.
  onEvent: report,
});
