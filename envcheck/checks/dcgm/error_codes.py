"""DCGM's own error codes (DCGM_FR_*): the severity DCGM gives each, and which errors say nothing of the hardware.

The severities and categories are DCGM's (`dcgmErrorMeta` in dcgmlib/src/dcgm_errors.c, the enums in
dcgmlib/dcgm_errors.h, DCGM 4.6.0). Since 3.3 `dcgmi diag -j` writes `error_severity` and `error_category` beside each
`error_id`; 3.2 writes the `error_id` alone, 2.x and 3.0-3.1 only the text, so the code is found from DCGM's message
formats (the `*_MSG` macros of dcgm_errors.h, with their 2.x wordings) for the errors that change a verdict.
"""

from __future__ import annotations

import re

# dcgmErrorSeverity_t
NONE, MONITOR, ISOLATE, UNKNOWN, TRIAGE, CONFIG, RESET = range(7)
SEVERITY_NAMES = ("none", "monitor", "isolate", "unknown", "triage", "config", "reset")
INTERNAL_OTHER = 16  # dcgmErrorCategory_t DCGM_FR_EC_INTERNAL_OTHER: DCGM's own failure

# Each DCGM_FR_* code by the severity dcgmErrorMeta gives it (codes 0-132, DCGM 4.6.0).
_BY_SEVERITY = {
    UNKNOWN: "0 1 2 21",
    MONITOR: "5 10 11 12 16 17 19 26 27 32 34 40 41 42 43 51 53 61 69 74 75 76 108 123 131",
    ISOLATE: "3 4 7 8 13 15 24 33 35 36 38 39 52 57 58 70 71 79 81 86 87 88 95 98 102 103 104 105 106 107 109 "
    "111 113 114 115 116 118 119 120 121 122 126",
    TRIAGE: "9 14 22 30 31 37 44 45 49 50 54 56 59 62 63 64 65 66 67 73 77 89 90 91 92 93 94 97 99 100 101 110 "
    "124 130 132",
    CONFIG: "18 20 23 28 29 46 47 48 55 60 68 72 78 82 96 112 117",
    RESET: "6 25 80 83 84 85 125 127 128 129",
}
SEVERITY = {int(code): severity for severity, codes in _BY_SEVERITY.items() for code in codes.split()}
# DCGM_FR_EC_INTERNAL_OTHER: bad parameter, host engine connection, field query/tag/type, internal error, a stat it
# could not collect, field watches, a DCGM API failure, pause/resume of the host engine.
INTERNAL = frozenset({21, 26, 27, 32, 37, 44, 49, 53, 67, 97})

# The message formats of the codes that change a verdict (config and internal ones), for documents without error ids;
# re.search, since 4.x prefixes the subtest ("Persistence Mode: ...") and NVVS the GPU ("GPU 0 ...").
_FORMATS = (
    (18, r"File .+ could not be accessed directly"),
    (20, r"The number of devices NVML returns is different than the number of devices in /dev"),
    (23, r"Found (?:blacklisted driver|driver on the denylist)"),
    (28, r"Found CUDA performance-limiting environment variable"),
    (29, r"Persistence mode for GPU \d+ is disabled"),
    (46, r"is running at PCI link width \d+X, which is below the minimum"),
    (47, r"Test was aborted early due to user signal"),
    (48, r"The .+ test is skipped"),
    (55, r"because ECC is not enabled on GPU"),
    (60, r"ECC Memory is not turned on or is unsupported"),
    (68, r"Unable to run concurrent pair bandwidth test without 2 or more gpus"),
    (72, r"which is too low to attempt to achieve target power"),
    (78, r"This card does not support the L1 cache test"),
    (82, r"No valid GPUs passed to plugin"),
    (96, r"does not have permissions to create a file in directory"),
    (117, r"Test .+ was skipped"),
    (26, r"Could not connect to the host engine"),
    (27, r"Could not query field .+ for GPU"),
    (44, r"There was an internal error during the test"),
    (49, r"Unable to generate / collect stat"),
    (53, r"Unable to add field watches to DCGM"),
    (67, r"Error using DCGM API"),
)
_FORMAT_RES = tuple((code, re.compile(pattern)) for code, pattern in _FORMATS)


def code_of(text: str) -> int | None:
    """The DCGM_FR_* code of a message written without one (2.x, 3.0-3.1), for the codes that change a verdict."""
    return next((code for code, pattern in _FORMAT_RES if pattern.search(text)), None)


def kind(code: int | None, severity: int | None, category: int | None) -> str:
    """What one DCGM error says of the node: 'fault' (DCGM isolates, resets or triages the GPU), 'monitor' (the
    GPU works but needs watching), 'config' (a setting: persistence mode, ECC off, a power limit, a test disabled or
    skipped), 'internal' (DCGM's own failure: no evidence either way) or 'unknown' (no code and no severity given)."""
    if category == INTERNAL_OTHER or (category is None and code in INTERNAL):
        return "internal"
    if severity is None and code is not None:
        severity = SEVERITY.get(code)
    if severity in (ISOLATE, RESET, TRIAGE):
        return "fault"
    if severity == MONITOR:
        return "monitor"
    if severity == CONFIG:
        return "config"
    return "unknown"
