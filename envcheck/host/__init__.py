"""`envcheck host`: before anything is pulled, which of our images will run on this host, and why not.

`collect` (the report), `rows` (which rows run, and why not), `gpus` (the driver and GPUs), `docker_setup` (the
engine's GPU setup), `cdi`, `compose_gpu` and `documents` (the files it reads).

No torch: the driver and GPUs come from NVML (nvidia-ml-py, when installed), else `nvidia-smi`, else libcuda;
Docker's GPU setup from files (`/etc/docker/daemon.json`, CDI specs: envcheck.host.cdi, /dev/char links) and
`nvidia-ctk` on PATH; `--compose FILE` lints a compose file's GPU requests (envcheck.host.compose_gpu).
"""
