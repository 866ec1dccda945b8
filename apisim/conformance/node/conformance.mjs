// Conformance checks of a Kubernetes API server with @kubernetes/client-node.
//
// Usage: node conformance.mjs KUBECONFIG
//
// Each check talks to the server through the client (and, for faults, the simulator's /_sim/
// endpoints), prints PASS or FAIL with the reason, and the script exits non-zero when any check
// failed.

import * as k8s from '@kubernetes/client-node';

const PATIENCE_MS = 30000;

function expect(cond, what) {
  if (!cond) throw new Error(typeof what === 'string' ? what : JSON.stringify(what));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function eventually(what, check, timeoutMs = PATIENCE_MS) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    try {
      if (await check()) return;
    } catch (e) {
      last = e;
    }
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}${last ? ` (last error: ${last})` : ''}`);
}

// name -> resourceVersion, in name order, so two states compare as strings.
function sortedState(items) {
  return Object.fromEntries(
    items
      .map((c) => [c.metadata.name, c.metadata.resourceVersion])
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
  );
}

const suffix = () => Math.random().toString(36).slice(2, 8);

class Suite {
  constructor(kubeconfig) {
    this.kc = new k8s.KubeConfig();
    this.kc.loadFromFile(kubeconfig);
    this.server = this.kc.getCurrentCluster().server.replace(/\/$/, '');
    this.core = this.kc.makeApiClient(k8s.CoreV1Api);
    this.ns = `conf-node-${suffix()}`;
  }

  async setup() {
    await this.core.createNamespace({ body: { metadata: { name: this.ns } } });
  }

  async sim(method, path) {
    const r = await fetch(this.server + path, { method });
    expect(r.ok, `${method} ${path}: ${r.status}`);
    return r.json();
  }

  cm(name, labels = {}, data = { k: 'v' }) {
    return this.core.createNamespacedConfigMap({
      namespace: this.ns,
      body: { metadata: { name, labels }, data },
    });
  }

  async serverState(labelSelector) {
    const l = await this.core.listNamespacedConfigMap({ namespace: this.ns, labelSelector });
    return sortedState(l.items);
  }

  // ------------------------------------------------------------------ checks

  async checkWatch() {
    const list = await this.core.listNamespacedConfigMap({ namespace: this.ns });
    const rv = list.metadata.resourceVersion;
    const seen = [];
    let bookmarks = 0;
    let ended = null;
    const watch = new k8s.Watch(this.kc);
    const ctl = await watch.watch(
      `/api/v1/namespaces/${this.ns}/configmaps`,
      { resourceVersion: rv, allowWatchBookmarks: true },
      (type, obj) => {
        if (type === 'BOOKMARK') bookmarks += 1;
        else seen.push(`${type} ${obj.metadata.name}`);
      },
      (err) => {
        ended = err || 'closed';
      },
    );
    await this.cm('watched');
    await this.core.patchNamespacedConfigMap(
      { name: 'watched', namespace: this.ns, body: { data: { k: 'w' } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    await this.core.deleteNamespacedConfigMap({ name: 'watched', namespace: this.ns });
    await eventually('ADDED, MODIFIED, DELETED and a bookmark', () => seen.length === 3 && bookmarks > 0);
    expect(
      JSON.stringify(seen) === JSON.stringify(['ADDED watched', 'MODIFIED watched', 'DELETED watched']),
      seen,
    );
    ctl.abort();
    await eventually('the watch to end when aborted', () => ended !== null);
  }

  async checkInformerConvergesUnderFaults() {
    const label = 'group=inf';
    for (let i = 0; i < 5; i++) await this.cm(`inf-${i}`, { group: 'inf' });
    const path = `/api/v1/namespaces/${this.ns}/configmaps`;
    const informer = k8s.makeInformer(
      this.kc,
      path,
      () => this.core.listNamespacedConfigMap({ namespace: this.ns, labelSelector: label }),
      label,
    );
    let errors = 0;
    let stopped = false;
    // The informer stops on an error; restarting it is the caller's job.
    informer.on('error', (e) => {
      errors += 1;
      if (process.env.CONFORMANCE_DEBUG) console.log('  informer error:', e && (e.message || e));
      if (!stopped) setTimeout(() => informer.start().catch(() => {}), 200);
    });
    await informer.start();
    const converged = async (what) => {
      await eventually(what, async () => {
        const server = await this.serverState(label);
        const cached = sortedState(informer.list(this.ns));
        return JSON.stringify(server) === JSON.stringify(cached);
      });
    };
    try {
      await converged('the initial list');
      if (!(await this.hasSim())) {
        console.log('  (faults skipped: the server has no /_sim/ endpoints)');
        return;
      }
      const before = await this.sim('GET', '/_sim/faults');

      // Dropped watches: the informer resumes from its resourceVersion.
      await eventually('an open watch', async () => (await this.sim('GET', '/_sim/stats')).openWatches > 0);
      await this.sim('POST', '/_sim/faults/drop-watches');
      await this.cm('after-drop', { group: 'inf' });
      await converged('convergence after dropped watches');

      // Compaction: the watch gets ERROR 410 and the informer relists.
      await this.core.deleteNamespacedConfigMap({ name: 'inf-0', namespace: this.ns });
      await this.sim('POST', '/_sim/faults/compact');
      await this.cm('after-compact', { group: 'inf' });
      await converged('convergence after compaction');

      // 500s on the informer's own requests (a targeted fault, so the writes below pass): it
      // errors, is restarted, and catches up.
      await this.sim('POST', `/_sim/faults/fail?count=2&code=500&method=GET&path=${encodeURIComponent(path)}`);
      await this.sim('POST', '/_sim/faults/drop-watches');
      await this.cm('after-500', { group: 'inf' });
      await converged('convergence after 500s');

      const after = await this.sim('GET', '/_sim/faults');
      expect(after.watchesDropped >= before.watchesDropped + 2, after);
      expect(after.compactions === before.compactions + 1, after);
      expect((after.failures['500'] || 0) >= (before.failures['500'] || 0) + 2, after);
      expect(errors >= 1, 'the informer reported the errors');
    } finally {
      stopped = true;
      await informer.stop();
    }
  }

  async hasSim() {
    try {
      await this.sim('GET', '/_sim/stats');
      return true;
    } catch {
      return false;
    }
  }

  async checkPatches() {
    await this.cm('patched', { a: '1' }, { k: 'v' });
    const ref = { name: 'patched', namespace: this.ns };
    const patch = (body, strategy, extra = {}) =>
      this.core.patchNamespacedConfigMap(
        { ...ref, body, ...extra },
        k8s.setHeaderOptions('Content-Type', strategy),
      );
    await patch({ data: { merge: 'm', k: null } }, k8s.PatchStrategy.MergePatch);
    await patch({ metadata: { labels: { b: '2' } }, data: { smp: 's' } }, k8s.PatchStrategy.StrategicMergePatch);
    await patch([{ op: 'add', path: '/data/json', value: 'j' }], k8s.PatchStrategy.JsonPatch);
    let cur = await this.core.readNamespacedConfigMap(ref);
    expect(JSON.stringify(cur.data) === JSON.stringify({ json: 'j', merge: 'm', smp: 's' }), cur.data);
    expect(cur.metadata.labels.a === '1' && cur.metadata.labels.b === '2', cur.metadata.labels);

    // Server-side apply, with a field manager; a second manager conflicts unless it forces.
    const applied = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'patched' },
      data: { owned: 'by-node' },
    };
    await patch(applied, k8s.PatchStrategy.ServerSideApply, { fieldManager: 'node-a' });
    cur = await this.core.readNamespacedConfigMap(ref);
    expect(cur.data.owned === 'by-node', cur.data);
    const mf = cur.metadata.managedFields.find((m) => m.manager === 'node-a');
    expect(mf && mf.operation === 'Apply' && mf.fieldsV1['f:data']['f:owned'], cur.metadata.managedFields);
    let conflict = null;
    try {
      await patch({ ...applied, data: { owned: 'by-b' } }, k8s.PatchStrategy.ServerSideApply, {
        fieldManager: 'node-b',
      });
    } catch (e) {
      conflict = e;
    }
    expect(conflict && conflict.code === 409, `409 expected, got ${conflict}`);
    const body = typeof conflict.body === 'string' ? JSON.parse(conflict.body) : conflict.body;
    expect(body.details.causes[0].field === '.data.owned', body);
    await patch({ ...applied, data: { owned: 'by-b' } }, k8s.PatchStrategy.ServerSideApply, {
      fieldManager: 'node-b',
      force: true,
    });
    cur = await this.core.readNamespacedConfigMap(ref);
    expect(cur.data.owned === 'by-b', cur.data);
    // A failing JSON patch changes nothing.
    let failed = false;
    try {
      await patch([{ op: 'remove', path: '/data/nope' }], k8s.PatchStrategy.JsonPatch);
    } catch {
      failed = true;
    }
    expect(failed, 'a JSON patch that cannot apply fails');
    const again = await this.core.readNamespacedConfigMap(ref);
    expect(again.metadata.resourceVersion === cur.metadata.resourceVersion, 'unchanged');
  }
}

async function main() {
  if (process.argv.length !== 3) {
    console.error('usage: node conformance.mjs KUBECONFIG');
    process.exit(2);
  }
  const suite = new Suite(process.argv[2]);
  await suite.setup();
  const checks = ['checkWatch', 'checkInformerConvergesUnderFaults', 'checkPatches'];
  let failed = 0;
  for (const name of checks) {
    const t = Date.now();
    const label = name.replace(/^check/, '');
    try {
      await suite[name]();
      console.log(`PASS node ${label} (${((Date.now() - t) / 1000).toFixed(1)} s)`);
    } catch (e) {
      failed += 1;
      console.log(`FAIL node ${label}: ${e && e.stack ? e.stack : e}`);
    }
  }
  console.log(`node: ${checks.length - failed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

main().catch((e) => {
  console.log(`FAIL node setup: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
