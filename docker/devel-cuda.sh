# Installs nvcc (+ headers) pinned to exactly torch.version.cuda, and ninja; assembles CUDA_HOME.
# shellcheck shell=bash
set -euo pipefail
# shellcheck source=docker/pip-source.sh
source /opt/envcheck-build/pip-source.sh
req="$(python /opt/envcheck-build/nvcc.py)"
pip install --no-cache-dir "${PIP_SOURCE[@]}" "$req" ninja

# The nvidia wheels spread bin/, include/ and lib/ over site-packages/nvidia/<pkg>/ (CUDA 12) or
# site-packages/nvidia/cu13/ (CUDA 13). torch.utils.cpp_extension wants one CUDA_HOME: link them together.
cuda_home=/opt/venv/cuda
site="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
mkdir -p "$cuda_home/bin" "$cuda_home/include" "$cuda_home/lib64"
for pkg in "$site"/nvidia/*/; do
    [ -d "$pkg/bin" ] && cp -rs --remove-destination "$pkg/bin/." "$cuda_home/bin/"
    [ -d "$pkg/include" ] && cp -rs --remove-destination "$pkg/include/." "$cuda_home/include/"
    [ -d "$pkg/lib" ] && cp -rs --remove-destination "$pkg/lib/." "$cuda_home/lib64/"
    [ -d "$pkg/nvvm" ] && cp -rs --remove-destination "$pkg/nvvm" "$cuda_home/"
done
# Wheels ship only libX.so.N; the linker wants libX.so.
for lib in "$cuda_home"/lib64/lib*.so.*; do
    plain="${lib%%.so.*}.so"
    [ -e "$plain" ] || ln -s "$(readlink -f "$lib")" "$plain"
done
want="$(python -c 'import torch; print(torch.version.cuda)')"
have="$("$cuda_home/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')"
if [ "$have" != "$want" ]; then
    echo "nvcc is CUDA $have but torch was built with CUDA $want ($req)" >&2
    exit 1
fi
echo "nvcc $have from $req matches torch.version.cuda $want; CUDA_HOME=$cuda_home"
