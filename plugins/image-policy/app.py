"""image-policy: checks that every container image of every pod comes from an
allowed registry (the manifest's ``[config] allowed_registries``) and logs one
line per offending container:

    violation pod=NS/NAME container=C image=IMAGE registry=REGISTRY same-image-in-namespace=N

``N`` counts the cached pods of the namespace that run the same image (a cache
``by-index`` query), so one bad Deployment shows up with its blast radius.
``compliant pod=NS/NAME`` follows when a reported pod stops violating.

Invariant: a pod's violations are logged again only when they change; deletes
forget the pod. Image references are normalised the way the container runtime
resolves them: ``nginx`` is ``docker.io/library/nginx``, and the first path
element is a registry only when it has a ``.`` or ``:`` or is ``localhost``.
"""
import wasm_informer as wi

DEFAULT_REGISTRY = "docker.io"


class Policy:
    allowed = []          # normalised prefixes, e.g. "registry.k8s.io" or "docker.io/library"
    exempt = set()        # namespaces not checked
    reported = {}         # pod key -> signature of the violations last logged


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


def containers(pod: dict):
    spec = pod.get("spec") or {}
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(field) or []:
            if isinstance(c, dict) and isinstance(c.get("image"), str):
                yield c.get("name", "?"), c["image"]


def string_list(config: dict, field: str) -> list:
    value = config.get(field, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"config.{field} must be an array of strings")
    return value


class Handler(wi.Plugin):
    def configure(self, config):
        registries = string_list(config, "allowed_registries")
        if not registries:
            raise ValueError("config.allowed_registries must name at least one registry")
        Policy.allowed = [r.rstrip("/") for r in registries]
        Policy.exempt = set(string_list(config, "exempt_namespaces"))
        wi.info(f"policy allowed-registries={','.join(Policy.allowed)}")

    def handle(self, event):
        key = event.key
        if wi.is_deleted(event):
            Policy.reported.pop(key, None)
            return
        ns = event.object.meta.namespace or ""
        if ns in Policy.exempt:
            return
        pod = wi.body(event.object)
        bad = []
        for name, image in containers(pod):
            full = normalise(image)
            if not allowed(full):
                bad.append((name, image, full))
        signature = ";".join(f"{n}={i}" for n, i, _ in bad)
        previous = Policy.reported.get(key, "")
        if signature == previous:
            return
        if not bad:
            del Policy.reported[key]
            wi.info(f"compliant pod={key}")
            return
        # Query first: if the query fails, the pod stays unreported and is retried.
        peers = wi.by_index(event.resource, "namespace", ns) if ns else []
        Policy.reported[key] = signature
        for name, image, full in bad:
            same = sum(
                1 for p in peers
                if any(normalise(img) == full for _, img in containers(wi.body(p)))
            )
            wi.info(f"violation pod={key} container={name} image={image} "
                    f"registry={registry_of(full)} same-image-in-namespace={same}")
