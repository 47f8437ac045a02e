"""The Pod Security Standards' Baseline and Restricted controls, written from their published text.

Source: https://kubernetes.io/docs/concepts/security/pod-security-standards/ (the "Baseline" and "Restricted"
tables: restricted is cumulative, it includes every baseline control). Each control is a function of a pod spec
returning what breaks it; its name is the standard's own control name, so a manifest can name an exception.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

Spec = dict[str, Any]
# Baseline "Capabilities": adding any other is forbidden; Restricted narrows it to NET_BIND_SERVICE.
BASELINE_CAPS = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}
VOLUME_META = {"name"}


def pod_spec(doc: dict[str, Any]) -> Spec:
    """The pod spec of a Pod, or of a workload's pod template (Job, DaemonSet, Deployment...)."""
    if doc["kind"] == "Pod":
        return dict(doc["spec"])
    if doc["kind"] == "CronJob":
        return dict(doc["spec"]["jobTemplate"]["spec"]["template"]["spec"])
    return dict(doc["spec"]["template"]["spec"])


def containers(spec: Spec) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every container, init container and ephemeral container, with a path for messages."""
    for field in ("containers", "initContainers", "ephemeralContainers"):
        for c in spec.get(field) or []:
            yield f"{field}[{c.get('name')}]", c


def _ctx(c: dict[str, Any]) -> dict[str, Any]:
    return dict(c.get("securityContext") or {})


def host_process(spec: Spec) -> list[str]:
    pod = (spec.get("securityContext") or {}).get("windowsOptions") or {}
    found = ["pod"] if pod.get("hostProcess") else []
    return found + [
        p for p, c in containers(spec) if (_ctx(c).get("windowsOptions") or {}).get("hostProcess")
    ]


def host_namespaces(spec: Spec) -> list[str]:
    return [f for f in ("hostNetwork", "hostPID", "hostIPC") if spec.get(f)]


def privileged(spec: Spec) -> list[str]:
    return [p for p, c in containers(spec) if _ctx(c).get("privileged")]


def baseline_capabilities(spec: Spec) -> list[str]:
    return [
        f"{p} adds {cap}"
        for p, c in containers(spec)
        for cap in (_ctx(c).get("capabilities") or {}).get("add") or []
        if cap not in BASELINE_CAPS
    ]


def host_path_volumes(spec: Spec) -> list[str]:
    return [v["name"] for v in spec.get("volumes") or [] if "hostPath" in v]


def host_ports(spec: Spec) -> list[str]:
    return [
        f"{p} hostPort {port['hostPort']}"
        for p, c in containers(spec)
        for port in c.get("ports") or []
        if port.get("hostPort")
    ]


def _profiles(spec: Spec, key: str) -> Iterator[tuple[str, dict[str, Any]]]:
    pod = (spec.get("securityContext") or {}).get(key)
    if pod is not None:
        yield "pod", pod
    for p, c in containers(spec):
        if _ctx(c).get(key) is not None:
            yield p, _ctx(c)[key]


def apparmor(spec: Spec) -> list[str]:
    bad = [
        f"{p} {prof.get('type')}"
        for p, prof in _profiles(spec, "appArmorProfile")
        if prof.get("type") not in ("RuntimeDefault", "Localhost")
    ]
    notes = (spec.get("metadata") or {}).get("annotations") or {}
    return bad + [
        k
        for k, v in notes.items()
        if k.startswith("container.apparmor.security.beta.kubernetes.io/")
        and v != "runtime/default"
        and not v.startswith("localhost/")
    ]


def selinux(spec: Spec) -> list[str]:
    return [
        f"{p} {opts}"
        for p, opts in _profiles(spec, "seLinuxOptions")
        if (opts.get("type") or "") not in SELINUX_TYPES or opts.get("user") or opts.get("role")
    ]


def proc_mount(spec: Spec) -> list[str]:
    return [p for p, c in containers(spec) if _ctx(c).get("procMount") not in (None, "Default")]


def baseline_seccomp(spec: Spec) -> list[str]:
    return [p for p, prof in _profiles(spec, "seccompProfile") if prof.get("type") == "Unconfined"]


def sysctls(spec: Spec) -> list[str]:
    return [
        s["name"]
        for s in (spec.get("securityContext") or {}).get("sysctls") or []
        if s["name"] not in SAFE_SYSCTLS
    ]


def volume_types(spec: Spec) -> list[str]:
    return [
        f"{v['name']}: {kind}"
        for v in spec.get("volumes") or []
        for kind in set(v) - VOLUME_META
        if kind not in RESTRICTED_VOLUMES
    ]


def privilege_escalation(spec: Spec) -> list[str]:
    return [p for p, c in containers(spec) if _ctx(c).get("allowPrivilegeEscalation") is not False]


def non_root(spec: Spec) -> list[str]:
    """runAsNonRoot true on the pod (containers may leave it unset) or on every container; false nowhere."""
    pod = (spec.get("securityContext") or {}).get("runAsNonRoot")
    return [p for p, c in containers(spec) if _ctx(c).get("runAsNonRoot", pod) is not True]


def non_root_user(spec: Spec) -> list[str]:
    pod = ["pod"] if (spec.get("securityContext") or {}).get("runAsUser") == 0 else []
    return pod + [p for p, c in containers(spec) if _ctx(c).get("runAsUser") == 0]


def restricted_seccomp(spec: Spec) -> list[str]:
    """RuntimeDefault or Localhost on the pod, or on every container (a container's own one wins)."""
    pod = ((spec.get("securityContext") or {}).get("seccompProfile") or {}).get("type")
    return [
        p
        for p, c in containers(spec)
        if ((_ctx(c).get("seccompProfile") or {}).get("type") or pod) not in ("RuntimeDefault", "Localhost")
    ]


def restricted_capabilities(spec: Spec) -> list[str]:
    out = []
    for p, c in containers(spec):
        caps = _ctx(c).get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            out.append(f"{p} does not drop ALL")
        out += [f"{p} adds {cap}" for cap in caps.get("add") or [] if cap != "NET_BIND_SERVICE"]
    return out


BASELINE: dict[str, Callable[[Spec], list[str]]] = {
    "HostProcess": host_process,
    "Host Namespaces": host_namespaces,
    "Privileged Containers": privileged,
    "Capabilities": baseline_capabilities,
    "HostPath Volumes": host_path_volumes,
    "Host Ports": host_ports,
    "AppArmor": apparmor,
    "SELinux": selinux,
    "/proc Mount Type": proc_mount,
    "Seccomp": baseline_seccomp,
    "Sysctls": sysctls,
}
RESTRICTED: dict[str, Callable[[Spec], list[str]]] = {
    "Volume Types": volume_types,
    "Privilege Escalation": privilege_escalation,
    "Running as Non-root": non_root,
    "Running as Non-root user": non_root_user,
    "Seccomp (restricted)": restricted_seccomp,
    "Capabilities (restricted)": restricted_capabilities,
}


def violations(doc: dict[str, Any]) -> dict[str, list[str]]:
    """Every Baseline and Restricted control the manifest's pod breaks, with what breaks it."""
    spec = pod_spec(doc)
    if doc["kind"] != "Pod":  # AppArmor's annotations sit on the template's metadata
        spec["metadata"] = (doc["spec"].get("template") or {}).get("metadata") or {}
    else:
        spec["metadata"] = doc.get("metadata") or {}
    found = {name: rule(spec) for name, rule in {**BASELINE, **RESTRICTED}.items()}
    return {name: what for name, what in found.items() if what}
