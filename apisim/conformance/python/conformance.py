"""Conformance checks of a Kubernetes API server with the official Python client.

Usage: python conformance.py KUBECONFIG

Each check talks to the server only through the `kubernetes` package (and, for faults, the
simulator's /_sim/ endpoints when the server has them), prints PASS or FAIL with the reason, and
the script exits non-zero when any check failed.
"""

import datetime
import json
import random
import string
import sys
import threading
import time
import traceback
import urllib.request

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
from kubernetes.informer import SharedInformer
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

PATIENCE = 30.0


def suffix():
    return "".join(random.choice(string.ascii_lowercase + string.digits) for _ in range(6))


def eventually(what, check, timeout=PATIENCE):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception as e:  # the server may be between faults
            last = e
        time.sleep(0.1)
    raise AssertionError("timed out waiting for {} (last error: {!r})".format(what, last))


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


class Suite:
    def __init__(self, kubeconfig):
        config.load_kube_config(config_file=kubeconfig)
        self.server = client.Configuration.get_default_copy().host.rstrip("/")
        self.core = client.CoreV1Api()
        self.ns = "conf-py-" + suffix()
        self.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=self.ns)))

    def sim(self, method, path):
        req = urllib.request.Request(self.server + path, method=method, data=b"" if method == "POST" else None)
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read() or b"null")

    def cm(self, name, data=None, labels=None):
        return self.core.create_namespaced_config_map(
            self.ns,
            client.V1ConfigMap(
                metadata=client.V1ObjectMeta(name=name, labels=labels), data=data or {"k": "v"}
            ),
        )

    def names(self, **kw):
        return sorted(c.metadata.name for c in self.core.list_namespaced_config_map(self.ns, **kw).items)

    # ------------------------------------------------------------------ checks

    def check_list(self):
        for n in ["a", "b", "c"]:
            self.cm("list-" + n, labels={"group": "list"})
        lst = self.core.list_namespaced_config_map(self.ns, label_selector="group=list")
        expect([c.metadata.name for c in lst.items] == ["list-a", "list-b", "list-c"], lst.items)
        expect(int(lst.metadata.resource_version) > 0, lst.metadata)
        one = self.core.read_namespaced_config_map("list-b", self.ns)
        expect(one.data == {"k": "v"} and one.metadata.uid, one)
        # A delete of a configmap answers a Success Status (this client hands it over as a dict).
        st = self.core.delete_namespaced_config_map("list-c", self.ns)
        st = st if isinstance(st, dict) else st.to_dict()
        expect(st["kind"] == "Status" and st["status"] == "Success", st)
        expect(st["details"]["name"] == "list-c" and st["details"]["kind"] == "configmaps", st)
        expect(self.names(label_selector="group=list") == ["list-a", "list-b"], "list-c deleted")

    def check_paged_list(self):
        for i in range(25):
            self.cm("page-%02d" % i, labels={"group": "page"})
        seen, token, pages, first = [], None, 0, None
        while True:
            kw = {"limit": 10, "label_selector": "group=page"}
            if token:
                kw["_continue"] = token
            page = self.core.list_namespaced_config_map(self.ns, **kw)
            first = first or page
            pages += 1
            seen += [c.metadata.name for c in page.items]
            token = page.metadata._continue
            expect(page.metadata.resource_version == first.metadata.resource_version, "one snapshot")
            if not token:
                break
        expect(pages == 3, "25 items in pages of 10: {} pages".format(pages))
        expect(seen == ["page-%02d" % i for i in range(25)], seen)
        # Without a selector the first page counts what is left.
        page = self.core.list_namespaced_config_map(self.ns, limit=5)
        total = len(self.core.list_namespaced_config_map(self.ns).items)
        expect(page.metadata.remaining_item_count == total - 5, page.metadata)

    def check_watch_with_bookmarks(self):
        rv = self.core.list_namespaced_config_map(self.ns).metadata.resource_version

        def writer():
            time.sleep(0.3)
            for n in ["w-1", "w-2"]:
                self.cm(n)

        threading.Thread(target=writer, daemon=True).start()
        w = watch.Watch()
        added, bookmarks = [], 0
        # Stopped by its deadline (timeout_seconds), never from another thread.
        for ev in w.stream(
            self.core.list_namespaced_config_map,
            self.ns,
            resource_version=rv,
            allow_watch_bookmarks=True,
            timeout_seconds=20,
        ):
            if ev["type"] == "ADDED":
                added.append(ev["object"].metadata.name)
            elif ev["type"] == "BOOKMARK":
                bookmarks += 1
            if len(added) == 2 and bookmarks >= 1:
                break
        expect(added == ["w-1", "w-2"], "events after the resourceVersion: {}".format(added))
        expect(bookmarks >= 1, "a bookmark within the timeout")
        latest = int(self.core.list_namespaced_config_map(self.ns).metadata.resource_version)
        expect(int(w.resource_version) <= latest, "bookmark RV not ahead of the server")
        expect(int(w.resource_version) >= int(rv), "bookmark RV advanced")

    def check_informer(self):
        for i in range(5):
            self.cm("inf-%d" % i, labels={"group": "inf"})
        inf = SharedInformer(
            self.core.list_namespaced_config_map,
            namespace=self.ns,
            label_selector="group=inf",
            resync_period=2,  # also the watch's timeoutSeconds, so stop() returns promptly
        )
        events = []
        for t in ["ADDED", "MODIFIED", "DELETED"]:
            inf.add_event_handler(t, lambda o, t=t: events.append((t, o.metadata.name)))
        inf.start()
        try:
            def synced_with_server():
                server = {c.metadata.name: c.metadata.resource_version
                          for c in self.core.list_namespaced_config_map(self.ns, label_selector="group=inf").items}
                cached = {c.metadata.name: c.metadata.resource_version for c in inf.cache.list()}
                return server == cached

            eventually("the informer's initial list", lambda: len(inf.cache.list()) == 5)
            self.cm("inf-new", labels={"group": "inf"})
            self.core.patch_namespaced_config_map("inf-0", self.ns, {"data": {"k": "changed"}})
            self.core.delete_namespaced_config_map("inf-1", self.ns)
            eventually("live changes reach the cache", synced_with_server)
            expect(("ADDED", "inf-new") in events and ("DELETED", "inf-1") in events, events)
            if self.has_sim():
                self.sim("POST", "/_sim/faults/drop-watches")
                self.cm("inf-after-drop", labels={"group": "inf"})
                eventually("the cache converges after dropped watches", synced_with_server)
        finally:
            inf.stop()

    def has_sim(self):
        try:
            self.sim("GET", "/_sim/stats")
            return True
        except Exception:
            return False

    def check_410_after_compaction(self):
        if not self.has_sim():
            print("  (skipped: the server has no /_sim/faults/compact)")
            return
        old = self.core.list_namespaced_config_map(self.ns).metadata.resource_version
        self.cm("compacted")
        self.sim("POST", "/_sim/faults/compact")
        w = watch.Watch()
        try:
            for _ in w.stream(self.core.list_namespaced_config_map, self.ns, resource_version=old, timeout_seconds=10):
                raise AssertionError("no event may arrive from a compacted resourceVersion")
            raise AssertionError("the watch ended without the 410")
        except ApiException as e:
            expect(e.status == 410, "ERROR event with code 410, got {}".format(e.status))
            expect("Expired" in str(e.reason), e.reason)
        try:
            self.core.list_namespaced_config_map(self.ns, resource_version=old, resource_version_match="Exact")
            raise AssertionError("an exact list at a compacted version must fail")
        except ApiException as e:
            expect(e.status == 410, e.status)

    def check_conflict_on_stale_replace(self):
        cur = self.cm("stale")
        stale = self.core.read_namespaced_config_map("stale", self.ns)
        cur.data = {"k": "fresh"}
        self.core.replace_namespaced_config_map("stale", self.ns, cur)
        stale.data = {"k": "stale"}
        try:
            self.core.replace_namespaced_config_map("stale", self.ns, stale)
            raise AssertionError("a stale replace must fail")
        except ApiException as e:
            expect(e.status == 409, e.status)
            body = json.loads(e.body)
            expect(body["reason"] == "Conflict", body)
            expect("the object has been modified" in body["message"], body["message"])
        expect(self.core.read_namespaced_config_map("stale", self.ns).data == {"k": "fresh"}, "kept")

    def check_server_side_apply_and_events(self):
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "1"}}
        self.core.patch_namespaced_config_map(
            "ssa", self.ns, body, field_manager="py", _content_type="application/apply-patch+yaml")
        got = self.core.read_namespaced_config_map("ssa", self.ns)
        managers = [(m.manager, m.operation) for m in got.metadata.managed_fields]
        expect(("py", "Apply") in managers, managers)
        body["data"] = {"a": "2"}
        try:
            self.core.patch_namespaced_config_map(
                "ssa", self.ns, body, field_manager="other", _content_type="application/apply-patch+yaml")
            raise AssertionError("a second manager changing a.1 must conflict")
        except ApiException as e:
            expect(e.status == 409 and "conflict with \"py\"" in json.loads(e.body)["message"], e.body)
        ev = client.EventsV1Event(
            metadata=client.V1ObjectMeta(name="ev-1"),
            event_time=datetime.datetime.now(datetime.timezone.utc),
            reason="Checked", action="Check", type="Normal", note="from python",
            reporting_controller="example.com/conformance", reporting_instance="py",
            regarding=client.V1ObjectReference(kind="ConfigMap", name="ssa", namespace=self.ns),
        )
        events = client.EventsV1Api()
        events.create_namespaced_event(self.ns, ev)
        got = events.read_namespaced_event("ev-1", self.ns)
        expect(got.note == "from python" and got.regarding.name == "ssa", got)

    def check_leader_election(self):
        lease_name = "leader-" + suffix()
        leaders, lost = [], threading.Event()

        def candidate(identity, lead_for):
            def on_started():
                leaders.append(identity)
                if lead_for is not None:
                    time.sleep(lead_for)
                    raise RuntimeError("stepping down")  # stops renewing; run() returns
                while True:
                    time.sleep(1)

            cfg = electionconfig.Config(
                LeaseLock(lease_name, self.ns, identity),
                lease_duration=3,
                renew_deadline=2,
                retry_period=1,
                onstarted_leading=on_started,
                onstopped_leading=lost.set if lead_for is not None else (lambda: None),
            )
            threading.Thread(target=leaderelection.LeaderElection(cfg).run, daemon=True).start()

        coord = client.CoordinationV1Api()
        candidate("first", lead_for=2)
        eventually("the first candidate leads", lambda: leaders == ["first"])
        lease = coord.read_namespaced_lease(lease_name, self.ns)
        expect(lease.spec.holder_identity == "first", lease.spec)
        # This client writes MicroTime as "+00:00"; the server stores it as the apiserver does.
        raw = json.loads(coord.read_namespaced_lease(lease_name, self.ns, _preload_content=False).data)
        for f in ["acquireTime", "renewTime"]:
            t = raw["spec"][f]
            expect(t.endswith("Z") and len(t.split(".")[-1]) == 7, "{} as a MicroTime: {}".format(f, t))
        candidate("second", lead_for=None)
        time.sleep(1.5)
        expect(leaders == ["first"], "one leader while the lease is held: {}".format(leaders))
        eventually("the first steps down", lost.is_set)
        eventually("the second takes over once the lease expires", lambda: leaders == ["first", "second"], timeout=20)
        eventually(
            "the lease names the new holder",
            lambda: coord.read_namespaced_lease(lease_name, self.ns).spec.holder_identity == "second",
        )


def main():
    if len(sys.argv) != 2:
        print("usage: conformance.py KUBECONFIG", file=sys.stderr)
        return 2
    suite = Suite(sys.argv[1])
    checks = [m for m in dir(suite) if m.startswith("check_")]
    # A stable order: the file's order.
    checks.sort(key=lambda m: Suite.__dict__[m].__code__.co_firstlineno)
    failed = 0
    for name in checks:
        t = time.monotonic()
        try:
            getattr(suite, name)()
            print("PASS python {} ({:.1f} s)".format(name[len("check_"):], time.monotonic() - t), flush=True)
        except Exception:
            failed += 1
            print("FAIL python {}:".format(name[len("check_"):]), flush=True)
            traceback.print_exc(file=sys.stdout)
    print("python: {} passed, {} failed".format(len(checks) - failed, failed), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
