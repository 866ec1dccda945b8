// deployment-auditor: checks every Deployment against a label and annotation
// policy from the manifest's [config] and logs one line per violation:
//
//   violation deployment=NS/NAME missing-label=KEY
//   violation deployment=NS/NAME missing-annotation=KEY
//   violation deployment=NS/NAME label=KEY value=VALUE allowed=A|B
//   compliant deployment=NS/NAME            (a violating deployment was fixed)
//
// Invariant: a deployment's violations are logged again only when they change,
// so resyncs and updates that do not touch the policy stay quiet. An event whose
// object is already older than the cache (a newer event is queued) is skipped:
// the newer one is audited instead.
import { definePlugin, info, isStale, labels, annotations } from '../../sdk/js/src/informer.js';

const policy = {
  requiredLabels: [],
  requiredAnnotations: [],
  allowedLabelValues: {},
  exemptNamespaces: new Set(),
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

function audit(view) {
  const l = labels(view);
  const a = annotations(view);
  const out = [];
  for (const k of policy.requiredLabels) {
    if (!(k in l)) out.push(`missing-label=${k}`);
  }
  for (const k of policy.requiredAnnotations) {
    if (!(k in a)) out.push(`missing-annotation=${k}`);
  }
  for (const [k, allowed] of Object.entries(policy.allowedLabelValues)) {
    if (k in l && !allowed.includes(l[k])) {
      out.push(`label=${k} value=${l[k]} allowed=${allowed.join('|')}`);
    }
  }
  return out;
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
    info(
      `policy required-labels=${policy.requiredLabels.join(',')} ` +
        `required-annotations=${policy.requiredAnnotations.join(',')} ` +
        `restricted-labels=${Object.keys(values).join(',')}`,
    );
  },

  onEvent(event) {
    const key = event.key;
    if (event.kind === 'deleted') {
      reported.delete(key);
      return;
    }
    if (policy.exemptNamespaces.has(event.object.meta.namespace ?? '')) return;
    if (isStale(event)) return;

    const violations = audit(event.object);
    const signature = violations.join(';');
    const previous = reported.get(key) ?? '';
    if (signature === previous) return;
    if (violations.length === 0) {
      reported.delete(key);
      info(`compliant deployment=${key}`);
      return;
    }
    reported.set(key, signature);
    for (const v of violations) info(`violation deployment=${key} ${v}`);
  },
});
