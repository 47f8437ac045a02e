"""linalg.svd: torch.linalg.svd on CPU (LAPACK through MKL/OpenBLAS) and each GPU (cuSOLVER), as PyTorch's release
smoke test runs it (test_linalg: reduced and full SVD of 5x3, a batch of 7x5x3; on CUDA float32 and float64 of a
20x16x50x100 batch), with the reconstruction U diag(S) Vh checked against A instead of only printed."""

from __future__ import annotations

from typing import Any

from envcheck.checks.build.compiled_in import torch_reinstall
from envcheck.core.check import CheckSpec, Context, Needs
from envcheck.core.result import FaultClass, Result, failed, passed

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
SVD_ERROR = "linalg.svd_error"
SVD_WRONG = "linalg.svd_wrong"

# max |A - U diag(S) Vh| / max |A|: float32 SVD is good to ~1e-6 on these sizes, float64 to ~1e-14
TOLERANCE = {"float32": 1e-4, "float64": 1e-10}


def _cases(device: str) -> list[tuple[str, tuple[int, ...], str, bool]]:
    """(name, shape, dtype, full_matrices) the smoke test covers on `device`."""
    cases = [
        ("5x3 reduced", (5, 3), "float32", False),
        ("5x3 full", (5, 3), "float32", True),
        ("7x5x3 batch", (7, 5, 3), "float32", False),
    ]
    if device != "cpu":
        cases += [("20x16x50x100 batch", (20, 16, 50, 100), dtype, False) for dtype in ("float32", "float64")]
    return cases


def reconstruction_error(a: Any, full: bool) -> float:
    """SVD of `a`, shapes checked, and max |A - U diag(S) Vh| / max |A|."""
    import torch

    u, s, vh = torch.linalg.svd(a, full_matrices=full)
    m, n = a.shape[-2:]
    k = min(m, n)
    want = (m if full else k, k, n if full else k)
    if (u.shape[-1], s.shape[-1], vh.shape[-2]) != want:
        raise ValueError(f"svd returned shapes U{tuple(u.shape)} S{tuple(s.shape)} Vh{tuple(vh.shape)}")
    back = u[..., :, :k] @ torch.diag_embed(s) @ vh[..., :k, :]
    return float((a - back).abs().max() / a.abs().max())


def run_on(device: str) -> dict[str, Any]:
    """Every case on `device`: its relative error, or the exception (raised to the caller as text)."""
    import torch

    gen = torch.Generator().manual_seed(0)
    out: dict[str, Any] = {}
    for name, shape, dtype, full in _cases(device):
        a = torch.randn(*shape, generator=gen, dtype=getattr(torch, dtype)).to(device)
        out[f"{name} {dtype}"] = reconstruction_error(a, full)
    if device != "cpu":
        torch.cuda.synchronize(device)
    return out


def svd_verdict(per_device: dict[str, dict[str, Any] | str], version: str, cuda: str | None) -> Result:
    """Pure: per device either {case: relative error} or the error text. CPU wrong or failing is the build's
    (image); a GPU wrong while the CPU is right is the GPU's (node); a GPU raising is named with its text."""
    problems: list[tuple[str, str, str, str]] = []  # (summary, fix, class, code)
    cpu_ok = isinstance(per_device.get("cpu"), dict)
    for device, got in per_device.items():
        if isinstance(got, str):
            first = (got.strip().splitlines() or ["no error text"])[0][:300]
            where = "LAPACK" if device == "cpu" else "cuSOLVER"
            problems.append(
                (
                    f"torch.linalg.svd fails on {device} ({where}): {first}",
                    torch_reinstall(version, cuda) + "; check that LD_LIBRARY_PATH does not put another "
                    f"{'BLAS/LAPACK' if device == 'cpu' else 'libcusolver'} first",
                    FaultClass.IMAGE,
                    SVD_ERROR,
                )
            )
            continue
        for case, err in got.items():
            limit = TOLERANCE["float64" if case.endswith("float64") else "float32"]
            if err > limit:
                gpu_fault = device != "cpu" and cpu_ok
                problems.append(
                    (
                        f"torch.linalg.svd is wrong on {device}: {case} reconstructs A with relative "
                        f"error {err:.3g} (> {limit:g})",
                        "the GPU computes wrong results: run `dcgmi diag -r 3` or `nvidia-smi -q -d ECC` "
                        "and drain the node"
                        if gpu_fault
                        else torch_reinstall(version, cuda),
                        FaultClass.NODE if gpu_fault else FaultClass.IMAGE,
                        SVD_WRONG,
                    )
                )
    measured = {"devices": per_device}
    if problems:
        summary, fix, fault, code = problems[0]
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        return failed(
            summary + more,
            fix,
            measured=measured,
            expected={"relative_error": TOLERANCE},
            fault_class=fault,
            code=code,
            details="\n".join(p[0] for p in problems),
        )
    worst = max(
        (e for got in per_device.values() if isinstance(got, dict) for e in got.values()), default=0.0
    )
    return passed(
        f"torch.linalg.svd reconstructs A on {', '.join(per_device)} (worst relative error {worst:.2g})",
        measured=measured,
        expected={"relative_error": TOLERANCE},
    )


def linalg_svd(ctx: Context) -> Result:
    """SVD on CPU and every GPU reconstructs its input."""
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    per_device: dict[str, dict[str, Any] | str] = {}
    for device in ["cpu"] + [f"cuda:{i}" for i in range(gpus)]:
        try:
            per_device[device] = run_on(device)
        except Exception as exc:
            per_device[device] = f"{type(exc).__name__}: {exc}"
    return svd_verdict(per_device, torch.__version__, torch.version.cuda)


CHECKS = (
    CheckSpec(
        "linalg.svd",
        linalg_svd,
        "torch.linalg.svd reconstructs its input on CPU (LAPACK) and every GPU (cuSOLVER)",
        needs=Needs(torch=True),
        timeout_s=60,
    ),
)
