// Template wasm-informer plugin in JavaScript, world event-handler.
//
// For every pod it is told about, it logs one line with the number of pods
// cached in the pod's namespace, and it gives a pod that lacks the label
// `[config] label` (default `team`) that label, with the value
// `[config] value` (default `unassigned`), by server-side apply, then records a
// Normal Event `Labelled` about the pod. It decides from the pod as the cache holds it when the
// event is handled (an event may be stale). The apply must find the pod (a pod
// deleted while its event waited is never re-created), so the manifest needs
// to grant only `[[write]] resource = "v1/pods" verbs = ["patch"]`, and
// `events = true`.
//
// Build:  scripts/build-plugins.sh   (or: node sdk/js/build.mjs sdk/js/template/plugin.js out.wasm)
import { definePlugin, cache, kube, events, isNotFound, info } from '../src/informer.js';

const settings = { label: 'team', value: 'unassigned' };

function string(config, field) {
  const v = config[field];
  if (v === undefined) return settings[field];
  if (typeof v !== 'string' || v === '') throw new Error(`config.${field} must be a string`);
  return v;
}

function check(event) {
  const ns = event.object.namespace ?? '';
  // A query of the host's shared cache: no API call.
  const peers = cache.list('v1/pods', { namespace: ns }).length;
  info(`${event.kind} ${event.key} (${peers} pods in ${ns})`);
  const { label, value } = settings;
  // The event may be stale: decide from the pod as the cache holds it now (a
  // KubeObject: each getter reads one field from the host).
  const pod = cache.get('v1/pods', event.key);
  if (pod == null) {
    info(`gone ${event.key}`);
    return;
  }
  if (pod.label(label) != null || pod.deletionTimestamp != null) return;
  // Server-side apply of just the label, owned by `wasm-informer/PLUGIN`.
  const intent = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: pod.name, namespace: ns, labels: { [label]: value } },
  };
  try {
    // The pod may be gone since the event: mustExist never re-creates it.
    kube.apply('v1/pods', ns, pod.name, intent, { mustExist: true });
  } catch (e) {
    if (!isNotFound(e)) throw e;
    info(`gone ${event.key}`);
    return;
  }
  events.normal(pod, 'Labelled', 'Label', `set ${label}=${value}`);
  info(`labelled ${event.key} ${label}=${value}`);
}

export const handler = definePlugin({
  // `config` is the manifest's [config] table, already parsed.
  init(config) {
    settings.label = string(config, 'label');
    settings.value = string(config, 'value');
  },
  onAdd: check,
  onUpdate: check,
  onDelete(event) {
    info(`deleted ${event.key}`);
  },
});
