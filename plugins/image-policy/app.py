"""image-policy: checks that every container image of every pod comes from an
allowed registry (the manifest's ``[config] allowed_registries``) and logs one
line per offending container:

    violation pod=NS/NAME container=C image=IMAGE registry=REGISTRY same-image-in-namespace=N

``N`` counts the cached pods of the namespace that run the same image (a cache
``by-index`` query), so one bad Deployment shows up with its blast radius.
``compliant pod=NS/NAME`` follows when a reported pod stops violating.

``[config] mode``: ``"audit"`` (the default) only logs. ``"enforce"`` also acts
on the cluster: it annotates each violating pod with
``image-policy.wasm-informer.dev/violation: REGISTRY[,REGISTRY...]`` (a JSON
merge patch; removed again when the pod complies) and records one Warning
Event ``DisallowedRegistry`` per offending container about the pod (repeats
about one pod fold into the Event's ``series``). The manifest then grants
``[[write]] resource = "v1/pods" verbs = ["patch"]`` and ``events = true``.

Invariants: a pod's violations are logged (and recorded as Events) again only
when they change; deletes forget the pod; in enforce mode a pod's annotation
is patched only when it differs from the violations (so the update event the
patch causes changes nothing). Image references are normalised the way the
container runtime resolves them: ``nginx`` is ``docker.io/library/nginx``, and
the first path element is a registry only when it has a ``.`` or ``:`` or is
``localhost``.
"""
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

import wasm_informer as wi

DEFAULT_REGISTRY = "docker.io"
ANNOTATION = "image-policy.wasm-informer.dev/violation"
MODES = ("audit", "enforce")


class Policy:
    allowed: List[str] = []          # normalised prefixes, e.g. "registry.k8s.io" or "docker.io/library"
    exempt: Set[str] = set()         # namespaces not checked
    enforce = False
    reported: Dict[str, str] = {}    # pod key -> signature of the violations last reported


def normalise(image: str) -> str:
    """The full repository path of an image reference, without tag or digest."""
    ref = image.split("@", 1)[0]
    first, _, rest = ref.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        registry, path = first, rest
    else:
        registry, path = DEFAULT_REGISTRY, ref
        if "/" not in path:
            path = "library/" + path
    # Strip the tag: a ':' after the last '/'.
    slash = path.rfind("/")
    colon = path.rfind(":")
    if colon > slash:
        path = path[:colon]
    return f"{registry}/{path}"


def registry_of(normalised: str) -> str:
    return normalised.split("/", 1)[0]


def allowed(normalised: str) -> bool:
    return any(normalised == p or normalised.startswith(p + "/") for p in Policy.allowed)


def containers(pod: Dict[str, Any]) -> Iterator[Tuple[str, str]]:
    spec = pod.get("spec") or {}
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(field) or []:
            if isinstance(c, dict) and isinstance(c.get("image"), str):
                yield c.get("name", "?"), c["image"]


def string_list(config: Dict[str, Any], field: str) -> List[str]:
    value = config.get(field, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"config.{field} must be an array of strings")
    return value


def set_annotation(pod: wi.KubeObject, value: Optional[str]) -> None:
    """Makes the pod's violation annotation `value` (None removes it), unless it already is."""
    if pod.annotation(ANNOTATION) == value:
        return
    patch = wi.Patch.merge({"metadata": {"annotations": {ANNOTATION: value}}})
    try:
        wi.kube.patch(pod.resource, pod.namespace, pod.name, patch)
    except wi.ApiError as e:
        if e.kind != wi.ApiErrorKind.NOT_FOUND:  # gone since the event: nothing to enforce
            raise


class Handler(wi.Plugin):
    def configure(self, config: Dict[str, Any]) -> None:
        registries = string_list(config, "allowed_registries")
        if not registries:
            raise ValueError("config.allowed_registries must name at least one registry")
        mode = config.get("mode", "audit")
        if mode not in MODES:
            raise ValueError("config.mode must be \"audit\" or \"enforce\"")
        Policy.allowed = [r.rstrip("/") for r in registries]
        Policy.exempt = set(string_list(config, "exempt_namespaces"))
        Policy.enforce = mode == "enforce"
        wi.info(f"policy allowed-registries={','.join(Policy.allowed)}"
                + (" mode=enforce" if Policy.enforce else ""))

    def on_delete(self, event: wi.Event) -> None:
        Policy.reported.pop(event.key, None)

    def handle(self, event: wi.Event) -> None:
        pod = event.object
        key = pod.key
        ns = pod.namespace or ""
        if ns in Policy.exempt:
            return
        bad = []
        for name, image in containers(pod.body):
            full = normalise(image)
            if not allowed(full):
                bad.append((name, image, full))
        signature = ";".join(f"{n}={i}" for n, i, _ in bad)
        previous = Policy.reported.get(key, "")
        if Policy.enforce:
            registries = sorted({registry_of(full) for _, _, full in bad})
            set_annotation(pod, ",".join(registries) if registries else None)
        if signature == previous:
            return
        if not bad:
            del Policy.reported[key]
            wi.info(f"compliant pod={key}")
            return
        # Query first: if the query fails, the pod stays unreported and is retried.
        peers = wi.cache.by_index(pod.resource, "namespace", ns) if ns else []
        peer_images = [{normalise(img) for _, img in containers(p.body)} for p in peers]
        for name, image, full in bad:
            same = sum(1 for images in peer_images if full in images)
            wi.info(f"violation pod={key} container={name} image={image} "
                    f"registry={registry_of(full)} same-image-in-namespace={same}")
            if Policy.enforce:
                wi.events.warning(pod, "DisallowedRegistry", "Annotate",
                                  f"container {name} image {image}: registry {registry_of(full)} "
                                  f"is not allowed")
        Policy.reported[key] = signature
