// wasm-informer-wit: v0.1
//
// js-v01: a JavaScript plugin of the frozen world
// `wasm-informer:plugin/event-handler@0.1.0`, written against the 0.1 WIT
// directly (no SDK), as plugins were before 0.2: the host must keep running
// it unchanged. [config] mode = "noop" (the default: reads nothing, the 0.1
// baseline of the per-event cost measurements) or "echo": answers every event
// with `err(<what it saw, as JSON>)`, including a cache `get` of its own key.
import { get } from 'wasm-informer:plugin/cache@0.1.0';

let echo = false;

function meta(view) {
  if (view === undefined) return null;
  const m = view.meta;
  return {
    namespace: m.namespace ?? null,
    name: m.name,
    uid: m.uid,
    resource_version: m.resourceVersion,
    labels: m.labels.map(({ key, value }) => [key, value]),
    json_bytes: view.json.length,
  };
}

export const handler = {
  init(config) {
    const mode = JSON.parse(config).mode ?? 'noop';
    if (mode !== 'noop' && mode !== 'echo') throw `config.mode ${mode} is not noop|echo`;
    echo = mode === 'echo';
  },
  onEvent(event) {
    if (!echo) return;
    const cached = get(event.resource, event.key);
    throw JSON.stringify({
      world: '0.1',
      kind: event.kind,
      resource: event.resource,
      key: event.key,
      meta: meta(event.object),
      old: meta(event.oldObject),
      initial: event.isInInitialList,
      cached_resource_version: cached === undefined ? null : cached.meta.resourceVersion,
    });
  },
};
