// js-probe: exercises the JavaScript SDK for the guest-level tests. On every
// event it runs the ops of its [config] `ops`, in order, and returns the
// outcome of each as JSON in its `err` result, so a test can compare what the
// SDK sent and reported with what the host saw.
//
// An op is `{"call": C, ...}` with C one of
//   read                 every getter of the event's object (and old object)
//   cache-get | cache-list | by-index   {resource, key | namespace, selector | index, value}
//   get | create | replace | patch | delete | get-status | replace-status | patch-status
//                        {resource, namespace, name, body, patch, force,
//                         delete: {uid, resource_version, propagation}}
//   event                {event: {type, reason, action, note}} about the event's object
//   dry-run
//   use-after            keeps the event's object for the next event's `use-after`
//   use-event-after      keeps the event itself, and reads its object in the next event
//   finalizer            {resource, namespace, name, key, finalizer, cleanup_requeue_ms,
//                        cleanup_fails}: runs the SDK's finalizer helper; `apply` requeues
//                        after 1000 ms, `cleanup` is done, or requeues after
//                        `cleanup_requeue_ms` when given, or fails when `cleanup_fails`
// and its outcome is {"ok": true, ...} or {"ok": false, "error": KIND, "message": M}.
//
// Invariant: `on-event` always returns `err([<outcome>, ...])`.
import {
  definePlugin,
  cache,
  kube,
  events,
  Patch,
  ApiError,
  CacheError,
  Action,
  ReconcileError,
  Request,
  finalizer,
} from '../../../sdk/js/src/informer.js';

let ops = [];
let kept;
let keptEvent;

function read(o) {
  if (o === undefined) return null;
  return {
    resource: o.resource,
    key: o.key,
    namespace: o.namespace ?? null,
    name: o.name,
    uid: o.uid,
    resource_version: o.resourceVersion,
    generation: o.generation ?? null,
    label_app: o.label('app') ?? null,
    annotation_note: o.annotation('note') ?? null,
    labels: o.labels,
    annotations: o.annotations,
    meta: o.meta,
    reference: o.reference,
    body: o.body,
  };
}

const PATCHES = {
  merge: Patch.merge,
  json: Patch.json,
  'strategic-merge': Patch.strategicMerge,
  apply: Patch.apply,
};

function run(op, event) {
  const ns = op.namespace ?? undefined;
  const one = (o) => ({ ok: true, object: o === undefined ? null : o.body });
  switch (op.call) {
    case 'read':
      return { ok: true, object: read(event.object), old: read(event.old), kind: event.kind,
               initial: event.isInInitialList, final_state_unknown: event.finalStateUnknown };
    case 'cache-get':
      return { ok: true, keys: [cache.get(op.resource, op.key)].filter(Boolean).map((o) => o.key) };
    case 'cache-list':
      return { ok: true, keys: cache.list(op.resource, { namespace: ns, labelSelector: op.selector }).map((o) => o.key) };
    case 'by-index':
      return { ok: true, keys: cache.byIndex(op.resource, op.index, op.value).map((o) => o.key) };
    case 'get':
      return one(kube.get(op.resource, ns, op.name));
    case 'create':
      return one(kube.create(op.resource, ns, op.body));
    case 'replace':
      return one(kube.replace(op.resource, ns, op.name, op.body));
    case 'patch':
      return one(kube.patch(op.resource, ns, op.name, PATCHES[op.patch ?? 'merge'](op.body), { force: op.force }));
    case 'delete': {
      const d = op.delete ?? {};
      return one(kube.delete(op.resource, ns, op.name, {
        uid: d.uid, resourceVersion: d.resource_version, propagation: d.propagation,
      }));
    }
    case 'get-status':
      return one(kube.getStatus(op.resource, ns, op.name));
    case 'replace-status':
      return one(kube.replaceStatus(op.resource, ns, op.name, op.body));
    case 'patch-status':
      return one(kube.patchStatus(op.resource, ns, op.name, PATCHES[op.patch ?? 'merge'](op.body), { force: op.force }));
    case 'event': {
      const e = op.event ?? {};
      (e.type === 'warning' ? events.warning : events.normal)(event.object, e.reason, e.action, e.note);
      return { ok: true };
    }
    case 'dry-run':
      return { ok: true, dry_run: kube.dryRun() };
    case 'use-after': {
      const before = kept;
      kept = event.object;
      if (before === undefined) return { ok: true };
      return { ok: true, name: before.name };
    }
    case 'use-event-after': {
      const before = keptEvent;
      keptEvent = event;
      if (before === undefined) return { ok: true };
      return { ok: true, name: before.object.name };
    }
    case 'finalizer': {
      const request = new Request({ resource: op.resource, namespace: ns, name: op.name, key: op.key });
      let step = 'none';
      const action = finalizer(request, op.finalizer, {
        apply() {
          step = 'apply';
          return Action.requeueAfter(1000);
        },
        cleanup() {
          step = 'cleanup';
          if (op.cleanup_fails) throw ReconcileError.retry('cleanup failed');
          if (op.cleanup_requeue_ms != null) return Action.requeueAfter(op.cleanup_requeue_ms);
        },
      });
      const what = action === undefined || action.tag === 'done' ? 'done' : `requeue ${action.val}`;
      return { ok: true, step, action: what };
    }
    default:
      return { ok: false, error: 'sdk', message: `unknown call ${op.call}` };
  }
}

function outcome(op, event) {
  try {
    return run(op, event);
  } catch (e) {
    if (e instanceof ApiError) return { ok: false, error: e.kind, message: e.message, detail: e.detail, causes: e.causes };
    if (e instanceof CacheError) return { ok: false, error: `cache:${e.kind}`, message: e.message };
    return { ok: false, error: 'sdk', message: e instanceof Error ? e.message : String(e) };
  }
}

export const handler = definePlugin({
  init(config) {
    ops = config.ops ?? [];
  },
  onEvent(event) {
    throw JSON.stringify(ops.map((op) => outcome(op, event)));
  },
});
