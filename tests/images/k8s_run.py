"""A Kubernetes container, as its manifest sets it, run with the Docker SDK: the equivalent `docker run` flags.

securityContext (pod-level, overridden per container): runAsUser/runAsGroup -> --user U:G, readOnlyRootFilesystem
-> --read-only, capabilities.drop/add -> --cap-drop/--cap-add, allowPrivilegeEscalation: false -> --security-opt
no-new-privileges, seccompProfile RuntimeDefault -> Docker's default profile (Unconfined -> seccomp=unconfined).
Volumes: an emptyDir -> a tmpfs (exec, mode 1777, as an emptyDir is neither noexec nor owned by the pod's user), an
emptyDir with medium Memory at /dev/shm -> --shm-size of its sizeLimit, a hostPath -> a bind mount of the folder the
test gives for it. env -> environment, command+args -> the command, the image -> the one this repo built.

What cannot exist here is left out and said so by the tests: `resources.limits["nvidia.com/gpu"]` (no GPU, no
device plugin) and `runtimeClassName: nvidia` (no NVIDIA container runtime on this machine).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

UNITS = {"Ki": "k", "Mi": "m", "Gi": "g", "Ti": "t"}


def _size(limit: str | None) -> str | None:
    """Kubernetes' 16Gi as Docker's 16g."""
    if not limit:
        return None
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti)?", str(limit))
    assert m, f"unexpected size {limit!r}"
    return m.group(1) + UNITS.get(m.group(2) or "", "b")


def pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    """The pod spec of a Pod, Job, Indexed Job or DaemonSet manifest."""
    spec: dict[str, Any] = doc["spec"]
    return spec["template"]["spec"] if "template" in spec else spec


def container(spec: dict[str, Any], name: str) -> dict[str, Any]:
    """One container or init container by name."""
    found = [c for c in spec.get("initContainers", []) + spec["containers"] if c["name"] == name]
    assert found, f"no container {name} in the manifest"
    return dict(found[0])


def docker_kwargs(
    spec: dict[str, Any], c: dict[str, Any], host_paths: dict[str, Path] | None = None
) -> dict[str, Any]:
    """The Docker SDK `containers.run` keyword arguments equivalent to the container's securityContext and mounts."""
    ctx = {**spec.get("securityContext", {}), **c.get("securityContext", {})}
    kwargs: dict[str, Any] = {}
    if "runAsUser" in ctx:
        kwargs["user"] = f"{ctx['runAsUser']}:{ctx.get('runAsGroup', ctx['runAsUser'])}"
    if ctx.get("readOnlyRootFilesystem"):
        kwargs["read_only"] = True
    caps = ctx.get("capabilities", {})
    if caps.get("drop"):
        kwargs["cap_drop"] = list(caps["drop"])
    if caps.get("add"):
        kwargs["cap_add"] = list(caps["add"])
    security_opt = []
    if ctx.get("allowPrivilegeEscalation") is False:
        security_opt.append("no-new-privileges")
    if ctx.get("seccompProfile", {}).get("type") == "Unconfined":
        security_opt.append("seccomp=unconfined")
    if security_opt:
        kwargs["security_opt"] = security_opt
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    tmpfs: dict[str, str] = {}
    binds: dict[str, dict[str, str]] = {}
    for mount in c.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        path = mount["mountPath"]
        if "emptyDir" in volume:
            empty = volume["emptyDir"] or {}
            size = _size(empty.get("sizeLimit"))
            if empty.get("medium") == "Memory" and path == "/dev/shm":
                kwargs["shm_size"] = size or "64m"
            else:
                tmpfs[path] = ",".join(["exec", "mode=1777"] + ([f"size={size}"] if size else []))
        elif "hostPath" in volume:
            assert host_paths and volume["hostPath"]["path"] in host_paths, f"no host folder for {volume}"
            binds[str(host_paths[volume["hostPath"]["path"]])] = {
                "bind": path,
                "mode": "ro" if mount.get("readOnly") else "rw",
            }
        else:
            raise AssertionError(f"volume kind not translated: {volume}")
    if tmpfs:
        kwargs["tmpfs"] = tmpfs
    if binds:
        kwargs["volumes"] = binds
    env = {e["name"]: e["value"] for e in c.get("env", []) if "value" in e}
    if env:
        kwargs["environment"] = env
    if c.get("workingDir"):
        kwargs["working_dir"] = c["workingDir"]
    return kwargs


def command(c: dict[str, Any]) -> list[str]:
    """The container's command and args, as the kubelet starts them."""
    return [str(a) for a in c.get("command", []) + c.get("args", [])]


def policy_action(job: dict[str, Any], container_name: str, exit_code: int) -> str:
    """What a Job's podFailurePolicy does with a container's exit code: the first matching rule's action, else
    "Count" (against backoffLimit); 0 is "Succeeded" (Kubernetes matches onExitCodes for failed pods only)."""
    if exit_code == 0:
        return "Succeeded"
    for rule in job["spec"].get("podFailurePolicy", {}).get("rules", []):
        on = rule.get("onExitCodes")
        if not on or on.get("containerName", container_name) != container_name:
            continue
        inside = exit_code in on["values"]
        if inside == (on["operator"] == "In"):
            return str(rule["action"])
    return "Count"
