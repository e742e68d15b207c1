"""Drives the official Python `kubernetes` client against the wsgate simulator.

Run by tests/integration/python_client.rs. Input (environment):
  WSGATE_HOST        https://127.0.0.1:PORT
  WSGATE_TOKEN       bearer token
  WSGATE_CA          path of the CA certificate (PEM)
  WSGATE_NAMESPACE   namespace holding the objects the Rust side created
  WSGATE_KUBECONFIG  path of the simulator's generated kubeconfig
  WSGATE_NEW_WS      name of the Workspace this script creates while watching
  WSGATE_WATCH_S     server-side timeout of the watch (a backstop, in seconds)

Output: one JSON document on stdout; the Rust test asserts on it. Any exception is a
failure (non-zero exit, traceback on stderr), so strict model validation errors show.

With WSGATE_KINDS set (a JSON list of {group, version, kind, plural, namespaced, custom},
every kind the simulator stores), the script instead lists each kind across all namespaces
with the client's typed API (custom kinds through CustomObjectsApi) and prints, per kind,
the list's type and item count, or the error the client raised while parsing it.
"""

import json
import os
import re
import sys
import threading

import kubernetes
from kubernetes import client, config, watch

GROUP, VERSION, PLURAL = "kubeflow.org", "v1beta1", "workspaces"


def api_client():
    cfg = client.Configuration()
    cfg.host = os.environ["WSGATE_HOST"]
    cfg.api_key = {"authorization": os.environ["WSGATE_TOKEN"]}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    cfg.ssl_ca_cert = os.environ["WSGATE_CA"]
    cfg.verify_ssl = True
    return client.ApiClient(cfg)


def workspace(name):
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Workspace",
        "metadata": {"name": name, "labels": {"created-by": "python-client"}},
        "spec": {
            "paused": True,
            "kind": "jupyterlab",
            "podTemplate": {
                "volumes": {},
                "options": {"imageConfig": "jupyterlab-cpu", "podConfig": "tiny_cpu"},
            },
        },
    }


def main():
    ns = os.environ["WSGATE_NAMESPACE"]
    new_ws = os.environ["WSGATE_NEW_WS"]
    watch_s = int(os.environ.get("WSGATE_WATCH_S", "30"))
    out = {"client_version": kubernetes.__version__}

    api = api_client()
    co = client.CustomObjectsApi(api)
    core = client.CoreV1Api(api)
    apps = client.AppsV1Api(api)

    listed = co.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)
    out["list_kind"] = listed.get("kind")
    out["list_resource_version"] = listed["metadata"].get("resourceVersion")
    out["workspaces"] = sorted(i["metadata"]["name"] for i in listed["items"])

    pods = core.list_namespaced_pod(ns)
    out["pods"] = sorted(p.metadata.name for p in pods.items)
    # Quantities arrive as strings (the model's type); a JSON number would come through
    # as an int, which the client's own serialisation and comparisons do not expect.
    out["pod_limits"] = {
        p.metadata.name: {k: [type(v).__name__, v] for k, v in (c.resources.limits or {}).items()}
        for p in pods.items
        for c in p.spec.containers
        if c.resources is not None
    }

    # Typed lists fail as a whole if any object misses a field the models require.
    out["namespaces"] = sorted(n.metadata.name for n in core.list_namespace().items)
    out["nodes"] = len(core.list_node().items)
    out["events"] = len(core.list_namespaced_event(ns).items)
    out["statefulsets"] = len(apps.list_namespaced_stateful_set(ns).items)
    out["pvcs"] = len(core.list_namespaced_persistent_volume_claim(ns).items)
    out["quotas"] = len(core.list_namespaced_resource_quota(ns).items)

    # Watch: existing objects first arrive as ADDED; then a Workspace this script creates.
    events = []
    created = threading.Event()
    w = watch.Watch()
    if not out["workspaces"]:
        raise SystemExit("the Rust side must create at least one Workspace first")

    def create_once():
        if not created.is_set():
            created.set()
            threading.Thread(
                target=lambda: co.create_namespaced_custom_object(
                    GROUP, VERSION, ns, PLURAL, workspace(new_ws)
                )
            ).start()

    for ev in w.stream(
        co.list_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, timeout_seconds=watch_s
    ):
        obj = ev["object"]
        name = obj["metadata"]["name"]
        events.append([ev["type"], name, obj["metadata"].get("resourceVersion")])
        if ev["type"] == "ADDED" and name in out["workspaces"]:
            if all(any(e[1] == n for e in events) for n in out["workspaces"]):
                create_once()
        if ev["type"] == "ADDED" and name == new_ws:
            w.stop()
            break
    out["watch"] = events

    # A typed watch of core objects: pods arrive as V1Pod models.
    pod_events = []
    if not out["pods"]:
        raise SystemExit("the Rust side must create at least one Pod first")
    pw = watch.Watch()
    for ev in pw.stream(core.list_namespaced_pod, ns, timeout_seconds=watch_s):
        pod_events.append([ev["type"], ev["object"].metadata.name, type(ev["object"]).__name__])
        if len(pod_events) >= len(out["pods"]):
            pw.stop()
            break
    out["pod_watch"] = pod_events

    # The generated kubeconfig works for the Python client as well.
    kc_api = config.new_client_from_config(config_file=os.environ["WSGATE_KUBECONFIG"])
    kc_ns = client.CoreV1Api(kc_api).list_namespace()
    out["kubeconfig_namespaces"] = sorted(n.metadata.name for n in kc_ns.items)

    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


# The typed API class of each built-in group.
TYPED = {
    "": "CoreV1Api",
    "apps": "AppsV1Api",
    "batch": "BatchV1Api",
    "networking.k8s.io": "NetworkingV1Api",
    "rbac.authorization.k8s.io": "RbacAuthorizationV1Api",
}


def snake(kind):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower()


def every_list():
    api = api_client()
    out = {}
    for k in json.loads(os.environ["WSGATE_KINDS"]):
        key = f"{k['plural']}.{k['group']}" if k["group"] else k["plural"]
        try:
            if k["custom"]:
                listed = client.CustomObjectsApi(api).list_cluster_custom_object(
                    k["group"], k["version"], k["plural"]
                )
                out[key] = {
                    "type": listed.get("kind"),
                    "count": len(listed["items"]),
                    "kinds": sorted({i.get("kind") for i in listed["items"]}),
                }
            else:
                typed = getattr(client, TYPED[k["group"]])(api)
                suffix = "_for_all_namespaces" if k["namespaced"] else ""
                listed = getattr(typed, f"list_{snake(k['kind'])}{suffix}")()
                out[key] = {
                    "type": type(listed).__name__,
                    "count": len(listed.items),
                    "kinds": sorted({type(i).__name__ for i in listed.items}),
                }
        except Exception as e:  # each kind's failure is reported, the rest still listed
            out[key] = {"error": f"{type(e).__name__}: {e}"[:2000]}
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    if os.environ.get("WSGATE_KINDS"):
        every_list()
    else:
        main()
