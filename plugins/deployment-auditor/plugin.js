// deployment-auditor: checks every Deployment against a label and annotation
// policy from the manifest's [config], logs one line per violation and records
// it as a Warning Event about the Deployment:
//
//   violation deployment=NS/NAME missing-label=KEY              (Event MissingLabel)
//   violation deployment=NS/NAME missing-annotation=KEY         (Event MissingAnnotation)
//   violation deployment=NS/NAME label=KEY value=VALUE allowed=A|B  (Event DisallowedLabelValue)
//   compliant deployment=NS/NAME    (a violating deployment was fixed; a Normal Event Compliant)
//
// Events have the action `Audit`; repeats of one reason about one Deployment
// fold into the Event's `series`. `[config] events = false` turns Events off
// (the manifest then needs no `events = true`).
//
// Invariant: a deployment's violations are logged and recorded again only when
// they change, so resyncs and updates that do not touch the policy stay quiet.
// An event whose object is already older than the cache (a newer event is
// queued) is skipped: the newer one is audited instead.
import { definePlugin, info, isStale, events } from '../../sdk/js/src/informer.js';

const policy = {
  requiredLabels: [],
  requiredAnnotations: [],
  allowedLabelValues: {},
  exemptNamespaces: new Set(),
  events: true,
};

// key -> signature of the violations last reported for it.
const reported = new Map();

function stringList(config, field) {
  const v = config[field];
  if (v === undefined) return [];
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) {
    throw new Error(`config.${field} must be an array of strings`);
  }
  return v;
}

// Each violation: the log text, and the Event's reason and note.
function audit(deployment) {
  const labels = deployment.labels;
  const annotations = deployment.annotations;
  const out = [];
  for (const k of policy.requiredLabels) {
    if (!(k in labels)) {
      out.push({ text: `missing-label=${k}`, reason: 'MissingLabel', note: `label ${k} is required` });
    }
  }
  for (const k of policy.requiredAnnotations) {
    if (!(k in annotations)) {
      out.push({
        text: `missing-annotation=${k}`,
        reason: 'MissingAnnotation',
        note: `annotation ${k} is required`,
      });
    }
  }
  for (const [k, allowed] of Object.entries(policy.allowedLabelValues)) {
    if (k in labels && !allowed.includes(labels[k])) {
      out.push({
        text: `label=${k} value=${labels[k]} allowed=${allowed.join('|')}`,
        reason: 'DisallowedLabelValue',
        note: `label ${k}=${labels[k]} is not one of ${allowed.join(', ')}`,
      });
    }
  }
  return out;
}

function check(event) {
  const d = event.object;
  const key = d.key;
  if (policy.exemptNamespaces.has(d.namespace ?? '')) return;
  if (isStale(event)) return;

  const violations = audit(d);
  const signature = violations.map((v) => v.text).join(';');
  const previous = reported.get(key) ?? '';
  if (signature === previous) return;
  if (violations.length === 0) {
    reported.delete(key);
    info(`compliant deployment=${key}`);
    if (policy.events) events.normal(d, 'Compliant', 'Audit', 'the deployment meets the policy');
    return;
  }
  for (const v of violations) {
    info(`violation deployment=${key} ${v.text}`);
    if (policy.events) events.warning(d, v.reason, 'Audit', v.note);
  }
  // Recorded last: if an Event fails, the deployment is audited again next time.
  reported.set(key, signature);
}

export const handler = definePlugin({
  init(config) {
    policy.requiredLabels = stringList(config, 'required_labels');
    policy.requiredAnnotations = stringList(config, 'required_annotations');
    policy.exemptNamespaces = new Set(stringList(config, 'exempt_namespaces'));
    const values = config.allowed_label_values ?? {};
    if (typeof values !== 'object' || Array.isArray(values)) {
      throw new Error('config.allowed_label_values must be a table of label = [values]');
    }
    for (const [k, v] of Object.entries(values)) {
      if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) {
        throw new Error(`config.allowed_label_values.${k} must be an array of strings`);
      }
    }
    policy.allowedLabelValues = values;
    if (config.events !== undefined && typeof config.events !== 'boolean') {
      throw new Error('config.events must be true or false');
    }
    policy.events = config.events ?? true;
    info(
      `policy required-labels=${policy.requiredLabels.join(',')} ` +
        `required-annotations=${policy.requiredAnnotations.join(',')} ` +
        `restricted-labels=${Object.keys(values).join(',')}`,
    );
  },

  onAdd: check,
  onUpdate: check,
  onSync: check,
  onDelete(event) {
    reported.delete(event.key);
  },
});
