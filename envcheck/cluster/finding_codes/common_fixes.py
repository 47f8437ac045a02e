"""What the rows of the finding-code table share: the fault classes by short name, and fixes many rows give."""

from __future__ import annotations

from envcheck.core.result import FaultClass

NODE, IMAGE, CONFIG = FaultClass.NODE, FaultClass.IMAGE, FaultClass.CONFIG
REINSTALL = "pip install --force-reinstall torch (the wheel of the CUDA build this image pins)"
DRAIN = "drain the node; nvidia-smi -q; dmesg | grep -iE 'NVRM|Xid'; reset the GPU (nvidia-smi -r -i <i>) or reboot"
FLEET_FIX = "compare the node with its peers (envcheck fleet); drain it and run dcgmi diag -r 3 if it stays an outlier"
