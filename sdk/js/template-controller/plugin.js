// wasm-informer-world: controller
//
// Template wasm-informer controller in JavaScript: makes
// sure every object of its primary resource carries the label `[config] label`
// = `value` (default managed-by=wasm-informer), by a JSON merge patch, and
// records a Normal Event `Labelled` when it sets it.
//
// Level-triggered: it is told which object to look at, never what changed,
// and reads the current state from the cache. The manifest must grant
// `[[write]] resource = RESOURCE verbs = ["patch"]` and `events = true`.
//
// Build:  scripts/build-plugins.sh   (or: node sdk/js/build.mjs sdk/js/template-controller/plugin.js out.wasm)
import {
  defineController,
  Action,
  ReconcileError,
  Patch,
  kube,
  events,
  info,
  isNotFound,
} from '../src/informer.js';

const settings = { label: 'managed-by', value: 'wasm-informer', requeueMs: 0 };

function string(config, field) {
  const v = config[field];
  if (v === undefined) return settings[field];
  if (typeof v !== 'string' || v === '') throw new Error(`config.${field} must be a non-empty string`);
  return v;
}

export const reconciler = defineController({
  init(config) {
    settings.label = string(config, 'label');
    settings.value = string(config, 'value');
    const r = config.requeue_ms ?? 0;
    if (!Number.isInteger(r) || r < 0) throw new Error('config.requeue_ms must be a non-negative integer');
    settings.requeueMs = r;
  },

  reconcile(request) {
    const next = () => (settings.requeueMs ? Action.requeueAfter(settings.requeueMs) : Action.done());
    const object = request.object(); // the cached state; undefined when the object is gone
    if (object === undefined) {
      info(`gone ${request.key}`);
      return Action.done();
    }
    if (object.label(settings.label) === settings.value) return next();
    const patch = Patch.merge({ metadata: { labels: { [settings.label]: settings.value } } });
    try {
      kube.patch(request.resource, request.namespace, request.name, patch);
    } catch (e) {
      if (isNotFound(e)) return Action.done(); // deleted since: nothing to do
      // The server refuses this label: retrying cannot help.
      if (e.kind === 'invalid') throw ReconcileError.terminal(e.message);
      throw e; // anything else is retried with backoff
    }
    events.normal(object, 'Labelled', 'Label', `set ${settings.label}=${settings.value}`);
    info(`labelled ${request.key} ${settings.label}=${settings.value}`);
    return next();
  },
});
