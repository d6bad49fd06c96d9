# Sourced by bench/device.sh and the call scripts of bench/sweeps/ on the GPU machine, from the repository
# root: unpacks what bench/prepare.sh put into .device/ (binaries and plans travel as one tar.xz within the
# 64 MiB that goes with the tree), installs the Vulkan loader's packages it carries and points the loader at
# the NVIDIA driver. Sets D (the folder) and LD_LIBRARY_PATH.
D=.device
if [ -f $D/pack.tar.xz ]; then tar xJf $D/pack.tar.xz -C $D && rm $D/pack.tar.xz; fi
for f in $D/gl/*.deb; do dpkg -x "$f" /; done
ldconfig
# Shared libraries of the tools that the GPU machine lacks (bench/prepare.sh copies them).
export LD_LIBRARY_PATH=$PWD/$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
