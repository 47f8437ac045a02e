"""`dcgmi diag -j` documents: each as DCGM's writer wrote it in one version, or verbatim as a public report shows it.

Staged: all of it (no GPU, driver or DCGM exists here). A document "from the writer" is built with the field names,
types, nesting and status words of the named function of NVIDIA/DCGM at the named tag and laid out as jsoncpp's
toStyledString lays it out (keys sorted, as Json::Value's std::map keeps them; tab indents; " : "). Its messages are
DCGM's message formats (dcgmlib/dcgm_errors.h `*_MSG`) filled in, followed by their next step (`*_NEXT`), as
DcgmError composes them. A verbatim document says where it was copied from.
"""

from __future__ import annotations

import json
from typing import Any


def styled(doc: Any) -> str:
    """`doc` as jsoncpp's Json::Value::toStyledString writes it."""
    return json.dumps(doc, indent="\t", separators=(",", " : "), sort_keys=True) + "\n"


PERSISTENCE = (
    'Persistence mode for GPU 0 is disabled. Enable persistence mode by running "nvidia-smi -i <gpuId> -pm 1 " '
    "as root."
)
FAULTY_MEMORY = "Found 4 faulty memory elements on GPU 1 Run a field diagnostic on the GPU."
CUDA_BUSY = (  # NVIDIA/go-dcgm#52 and NVIDIA/DCGM#145: DCGM_FR_CUDA_API (51), severity MONITOR
    "GPU 0 Error using CUDA API cuCtxCreate Check DCGM and system logs for errors. Reset GPU. Restart DCGM. "
    "Rerun diagnostics. Unable to create CUDA context: 'CUDA-capable device(s) is/are busy or unavailable'."
)

# DCGM 2.x (v2.1.4 to v3.1.8): dcgmi/Diag.cpp HelperJsonAddBasicTests (a Deployment test: results[0] = {status,
# warnings: the message}) and HelperJsonAddResult ({gpu_ids: "<index>", status, warnings, info}, one string each);
# HelperDisplayDiagResult writes Pass, Skip, and Fail for everything else: the WARN of disabled persistence too.
V2 = styled(
    {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {
                    "category": "Deployment",
                    "tests": [
                        {"name": "Blacklist", "results": [{"status": "Pass"}]},
                        {
                            "name": "Persistence Mode",
                            "results": [{"status": "Fail", "warnings": PERSISTENCE}],
                        },
                    ],
                },
                {
                    "category": "Hardware",
                    "tests": [
                        {
                            "name": "GPU Memory",
                            "results": [
                                {
                                    "gpu_ids": "0",
                                    "info": "Allocated 15836319744 bytes (98.4%)",
                                    "status": "Pass",
                                },
                                {"gpu_ids": "1", "status": "Fail", "warnings": FAULTY_MEMORY},
                            ],
                        }
                    ],
                },
            ]
        }
    }
)
V2_WARN_ONLY = styled(
    {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {
                    "category": "Deployment",
                    "tests": [
                        {"name": "Persistence Mode", "results": [{"status": "Fail", "warnings": PERSISTENCE}]}
                    ],
                }
            ]
        }
    }
)

# DCGM 3.2 (v3.2.5, v3.2.6): HelperJsonAddResult adds a result-level error_id beside the one warning string; 3.1.8 on
# puts "version" and "Driver Version Detected" at the top (HelperJsonBuildOutput).
V3_2 = styled(
    {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {
                    "category": "Hardware",
                    "tests": [
                        {
                            "name": "GPU Memory",
                            "results": [
                                {"error_id": 52, "gpu_ids": "1", "status": "Fail", "warnings": FAULTY_MEMORY},
                                {"gpu_ids": "2", "status": "Pass"},
                            ],
                        }
                    ],
                }
            ]
        },
        "Driver Version Detected": "535.104.05",
        "version": "3.2.6",
    }
)

# DCGM 3.3.1: HelperJsonAddResult writes gpu_id "<index>" and a list of {warning, error_id, error_category,
# error_severity}; HelperJsonAddBasicTests writes the i-th Deployment error into results[i] as a string with its id,
# category and severity beside it, the status into results[0] only.
V3_3_1 = styled(
    {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {
                    "category": "Deployment",
                    "tests": [
                        {
                            "name": "Persistence Mode",
                            "results": [
                                {
                                    "error_category": 8,
                                    "error_id": 29,
                                    "error_severity": 5,
                                    "status": "Fail",
                                    "warnings": PERSISTENCE,
                                }
                            ],
                        }
                    ],
                },
                {
                    "category": "Hardware",
                    "tests": [
                        {
                            "name": "GPU Memory",
                            "results": [
                                {
                                    "gpu_id": "0",
                                    "status": "Fail",
                                    "warnings": [
                                        {
                                            "error_category": 6,
                                            "error_id": 51,
                                            "error_severity": 1,
                                            "warning": CUDA_BUSY,
                                        }
                                    ],
                                },
                                {"gpu_id": "1", "status": "Pass"},
                            ],
                        }
                    ],
                },
            ]
        },
        "Driver Version Detected": "545.23.08",
        "GPU Device IDs": ["2330", "2330"],
        "GPU Device Serials": {"0": "1652223012345", "1": "1652223012346"},
        "version": "3.3.1",
    }
)

# DCGM 3.3.3 to 3.3.9: HelperJsonAddBasicTests writes results[0] = {status, gpu_id: <int>, warnings: [{"warnings":
# text, error_id, error_category, error_severity}]} (the message under "warnings", not "warning"); 3.3.7 adds the CPU
# EUD's results keyed "cpu_id" (AddCpuEudResultIfAny). DCGM_FR_FAULTY_MEMORY (52) is ISOLATE (2), HARDWARE_MEMORY (10).
V3_3_9 = styled(
    {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {
                    "category": "Deployment",
                    "tests": [
                        {
                            "name": "Persistence Mode",
                            "results": [
                                {
                                    "gpu_id": 0,
                                    "status": "Fail",
                                    "warnings": [
                                        {
                                            "error_category": 8,
                                            "error_id": 29,
                                            "error_severity": 5,
                                            "warnings": PERSISTENCE,
                                        }
                                    ],
                                }
                            ],
                        }
                    ],
                },
                {
                    "category": "Hardware",
                    "tests": [
                        {
                            "name": "GPU Memory",
                            "results": [
                                {"gpu_id": "0", "status": "Pass"},
                                {
                                    "gpu_id": "1",
                                    "status": "Fail",
                                    "warnings": [
                                        {
                                            "error_category": 10,
                                            "error_id": 52,
                                            "error_severity": 2,
                                            "warning": FAULTY_MEMORY,
                                        }
                                    ],
                                },
                            ],
                        },
                        {"name": "CPU EUD Test", "results": [{"cpu_id": "0", "status": "Pass"}]},
                    ],
                },
            ]
        },
        "Driver Version Detected": "550.54.15",
        "GPU Device Serials": {"0": "1652223012345", "1": "1652223012346"},
        "version": "3.3.9",
    }
)

# NVIDIA/DCGM#139 (dcgmi 3.3.1 against a 3.3.0 host engine, `dcgmi diag -r 3 -j` on a T400): the part shown in the
# issue, verbatim; the issue elides the Deployment category (as {"..."}) and cuts off after the Stress category's
# first test, so the document is closed there.
ALL_SKIP_3_3 = """{
\t"DCGM GPU Diagnostic" :
\t{
\t\t"test_categories" :
\t\t[
\t\t\t{
\t\t\t\t"category" : "Integration",
\t\t\t\t"tests" :
\t\t\t\t[
\t\t\t\t\t{
\t\t\t\t\t\t"name" : "PCIe",
\t\t\t\t\t\t"results" :
\t\t\t\t\t\t[
\t\t\t\t\t\t\t{
\t\t\t\t\t\t\t\t"gpu_id" : "0",
\t\t\t\t\t\t\t\t"status" : "Skip"
\t\t\t\t\t\t\t}
\t\t\t\t\t\t]
\t\t\t\t\t}
\t\t\t\t]
\t\t\t},
\t\t\t{
\t\t\t\t"category" : "Hardware",
\t\t\t\t"tests" :
\t\t\t\t[
\t\t\t\t\t{
\t\t\t\t\t\t"name" : "GPU Memory",
\t\t\t\t\t\t"results" :
\t\t\t\t\t\t[
\t\t\t\t\t\t\t{
\t\t\t\t\t\t\t\t"gpu_id" : "0",
\t\t\t\t\t\t\t\t"status" : "Skip"
\t\t\t\t\t\t\t}
\t\t\t\t\t\t]
\t\t\t\t\t},
\t\t\t\t\t{
\t\t\t\t\t\t"name" : "Diagnostic",
\t\t\t\t\t\t"results" :
\t\t\t\t\t\t[
\t\t\t\t\t\t\t{
\t\t\t\t\t\t\t\t"gpu_id" : "0",
\t\t\t\t\t\t\t\t"status" : "Skip"
\t\t\t\t\t\t\t}
\t\t\t\t\t\t]
\t\t\t\t\t},
\t\t\t\t\t{
\t\t\t\t\t\t"name" : "EUD Test",
\t\t\t\t\t\t"results" :
\t\t\t\t\t\t[
\t\t\t\t\t\t\t{
\t\t\t\t\t\t\t\t"gpu_id" : "0",
\t\t\t\t\t\t\t\t"status" : "Skip"
\t\t\t\t\t\t\t}
\t\t\t\t\t\t]
\t\t\t\t\t}
\t\t\t\t]
\t\t\t},
\t\t\t{
\t\t\t\t"category" : "Stress",
\t\t\t\t"tests" :
\t\t\t\t[
\t\t\t\t\t{
\t\t\t\t\t\t"name" : "Targeted Stress",
\t\t\t\t\t\t"results" :
\t\t\t\t\t\t[
\t\t\t\t\t\t\t{
\t\t\t\t\t\t\t\t"gpu_id" : "0",
\t\t\t\t\t\t\t\t"status" : "Skip"
\t\t\t\t\t\t\t}
\t\t\t\t\t\t]
\t\t\t\t\t}
\t\t\t\t]
\t\t\t}
\t\t]
\t}
}
""".replace(" :\n", " : \n")  # jsoncpp ends a key line with a space

# `dcgmi diag -r 1 -j` on a GB10 DGX Spark (DCGM 4.2.3, driver 580.82.09; dcgmi exited 226), verbatim as a public
# project's Go test keeps it (the search index's code corpus, file id 62458550693; the index does not name the
# repository). DCGM writes the WARN of disabled persistence mode as "Fail", with error_severity 5 (DCGM_ERROR_CONFIG).
GB10_4_2_3 = """{
\t"DCGM Diagnostic" :
\t{
\t\t"test_categories" :
\t\t[
\t\t\t{
\t\t\t\t"category" : "Deployment",
\t\t\t\t"tests" :
\t\t\t\t[
\t\t\t\t\t{
\t\t\t\t\t\t"name" : "software",
\t\t\t\t\t\t"results" :
\t\t\t\t\t\t[
\t\t\t\t\t\t\t{
\t\t\t\t\t\t\t\t"entity_group" : "GPU",
\t\t\t\t\t\t\t\t"entity_group_id" : 1,
\t\t\t\t\t\t\t\t"entity_id" : 0,
\t\t\t\t\t\t\t\t"status" : "Fail",
\t\t\t\t\t\t\t\t"warnings" :
\t\t\t\t\t\t\t\t[
\t\t\t\t\t\t\t\t\t{
\t\t\t\t\t\t\t\t\t\t"error_category" : 8,
\t\t\t\t\t\t\t\t\t\t"error_id" : 29,
\t\t\t\t\t\t\t\t\t\t"error_severity" : 5,
\t\t\t\t\t\t\t\t\t\t"warning" : "Persistence Mode: Persistence mode for GPU 0 is disabled. Enable persistence \
mode by running \\"nvidia-smi -i <gpuId> -pm 1 \\" as root."
\t\t\t\t\t\t\t\t\t}
\t\t\t\t\t\t\t\t]
\t\t\t\t\t\t\t}
\t\t\t\t\t\t],
\t\t\t\t\t\t"test_summary" :
\t\t\t\t\t\t{
\t\t\t\t\t\t\t"info" :
\t\t\t\t\t\t\t[
\t\t\t\t\t\t\t\t"Error getting the SRAM Threshold Count for GPU 0. Status = 0. Value = 9223372036854775794. \
SRAM Threshold checking was skipped."
\t\t\t\t\t\t\t],
\t\t\t\t\t\t\t"status" : "Fail"
\t\t\t\t\t\t}
\t\t\t\t\t}
\t\t\t\t]
\t\t\t}
\t\t]
\t},
\t"entity_groups" :
\t[
\t\t{
\t\t\t"entities" :
\t\t\t[
\t\t\t\t{
\t\t\t\t\t"device_id" : "2e12",
\t\t\t\t\t"entity_id" : 0,
\t\t\t\t\t"serial_num" : "<<<NOT_SUPPORTED>>>"
\t\t\t\t}
\t\t\t],
\t\t\t"entity_group" : "GPU",
\t\t\t"entity_group_id" : 1
\t\t}
\t],
\t"metadata" :
\t{
\t\t"Driver Version Detected" : "580.82.09",
\t\t"version" : "4.2.3"
\t}
}"""


def _gpu_result(gpu: int, info: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"entity_group": "GPU", "entity_group_id": 1, "entity_id": gpu, "status": "Pass"}
    return {**out, "info": info} if info else out


# NVIDIA/DCGM#215 (DCGM 4.x, `dcgmi diag -r 4 -j` on 8 GPUs): the "diagnostic" test object verbatim as the issue
# shows it (each GPU's info list, the 16-message cap visible from GPU 2 on), placed in a document of its category.
DIAGNOSTIC_8_GPUS_4X = styled(
    {
        "DCGM Diagnostic": {
            "test_categories": [
                {
                    "category": "Hardware",
                    "tests": [
                        {
                            "name": "diagnostic",
                            "results": [
                                _gpu_result(
                                    g,
                                    [
                                        "Allocated space for 138 output matricies from 76077622886 bytes available.",
                                        "Running with precisions: FP64 1, FP32 1, FP16 1",
                                        f"GPU {g} calculated at approximately 859.08 gigaflops during this test",
                                    ][: 3 if g < 2 else 2],
                                )
                                if g < 3
                                else _gpu_result(g)
                                for g in range(8)
                            ],
                            "test_summary": {"status": "Pass"},
                        }
                    ],
                }
            ]
        }
    }
)


def v4(tests: list[dict[str, Any]], category: str = "Hardware", serials: dict[int, str] | None = None) -> str:
    """A 4.x document as Diag::HelperJsonBuildOutput (v4.0.0 to v4.6.0) writes it: entity_groups with each GPU's
    serial and device id (HelperJsonAddEntities), metadata (HelperJsonAddMetadata), the tests of one category."""
    gpus = [{"device_id": "2330", "entity_id": g, "serial_num": s} for g, s in (serials or {}).items()]
    doc: dict[str, Any] = {
        "DCGM Diagnostic": {"test_categories": [{"category": category, "tests": tests}]},
        "metadata": {"Driver Version Detected": "580.95.05", "version": "4.4.1"},
    }
    if gpus:
        doc["entity_groups"] = [{"entities": gpus, "entity_group": "GPU", "entity_group_id": 1}]
    return styled(doc)


def v4_error(text: str, code: int, severity: int, category: int) -> dict[str, Any]:
    """One error entry as HelperJsonAddResult writes it in 4.x."""
    return {"error_category": category, "error_id": code, "error_severity": severity, "warning": text}


def v4_gpu(gpu: int, status: str, *errors: dict[str, Any]) -> dict[str, Any]:
    """One GPU's result in 4.x (entity_group "GPU", entity_group_id 1)."""
    out: dict[str, Any] = {"entity_group": "GPU", "entity_group_id": 1, "entity_id": gpu, "status": status}
    return {**out, "warnings": list(errors)} if errors else out


# Diag::HelperDisplayFailureMessage (3.2 to 4.6): a diagnostic that could not run, with DCGM's reason; the MIG text is
# NvidiaValidationSuite.cpp's (a system error reaches dcgmi as "Error: <text>", RunDiagOnce).
RUNTIME_ERROR_4X = styled(
    {
        "DCGM Diagnostic": {
            "runtime_error": "Error: Unable to complete diagnostic for group 2147483647. Return: (-30) : The NVVS "
            "returned an error\nCould not load plugin libmemory.so\n",
            "version": "4.4.1",
        }
    }
)
MIG_REFUSED_4X = styled(
    {
        "DCGM Diagnostic": {
            "runtime_error": "Error: Cannot run diagnostic: MIG is enabled, but no compute instances are "
            "configured. CUDA needs to execute on a compute instance if MIG is enabled.",
            "version": "4.4.1",
        }
    }
)


def iterations(*docs: str, overall: str = "Pass") -> str:
    """`dcgmi diag --iterations N -j` (Diag::RunStartDiag): each run's document under "iterations"."""
    return styled({"Overall Result": overall, "iterations": [json.loads(d) for d in docs]})


# NVVS's own JSON (nvvs/src/JsonOutput.cpp, 3.3.x, what `nvvs -j` writes and the host engine reads): upper-case
# statuses, gpu_ids an int per GPU or "0,1" for a software test, results indexed by GPU id (with `-i 4,5`, indices 0
# to 3 are jsoncpp's null), each error prefixed "GPU <i> ".
NVVS_3_3 = styled(
    {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {
                    "category": "Deployment",
                    "tests": [{"name": "Denylist", "results": [{"gpu_ids": "4,5", "status": "PASS"}]}],
                },
                {
                    "category": "Stress",
                    "tests": [
                        {
                            "name": "Targeted Power",
                            "results": [
                                None,
                                None,
                                None,
                                None,
                                {"gpu_ids": 4, "status": "PASS"},
                                {
                                    "gpu_ids": 5,
                                    "status": "WARN",
                                    "warnings": [
                                        {
                                            "error_category": 9,
                                            "error_id": 40,
                                            "error_severity": 1,
                                            "warning": "GPU 5 There were thermal violations totaling 12.5 "
                                            "seconds for GPU 5 Verify that the cooling on this machine is "
                                            "functional, including external, thermal material interface, fans, "
                                            "and any other components.",
                                        }
                                    ],
                                },
                            ],
                        }
                    ],
                },
            ],
            "version": "3.3.9",
        }
    }
)
